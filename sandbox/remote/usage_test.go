package remote

import (
	"os/exec"
	"testing"
	"time"
)

// TestUsageMeterCountsTheProcessTree: a busy child's CPU and the tree's
// memory show in the sample.
func TestUsageMeterCountsTheProcessTree(t *testing.T) {
	m := newUsageMeter()
	start := time.Now()
	if s := m.sample(start); s == nil || s.MemoryMB <= 0 || s.CPUPercent != 0 {
		t.Fatalf("first sample %+v: want memory, no CPU figure yet", s)
	}
	// A child that keeps a CPU busy for up to 5 s.
	cmd := exec.Command("bash", "-c", `end=$((SECONDS+5)); while [ $SECONDS -lt $end ]; do :; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var busy float64
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline) && busy <= 0; {
		time.Sleep(200 * time.Millisecond)
		if s := m.sample(time.Now()); s != nil {
			busy = s.CPUPercent
		}
	}
	if busy <= 0 {
		t.Errorf("a busy child's CPU did not show: %.1f%%", busy)
	}
}

func TestParseStat(t *testing.T) {
	line := "1234 (my (odd) cmd) S 42 1234 1234 0 -1 4194560 100 0 0 0 250 50 10 5 20 0 1 0 100 1000000 300 18446744073709551615"
	p, ok := parseStat(line, 4096)
	if !ok || p.ppid != 42 || p.cpu != 3*time.Second || p.reaped != 150*time.Millisecond || p.rss != 300*4096 {
		t.Errorf("parseStat = %+v %v", p, ok)
	}
}
