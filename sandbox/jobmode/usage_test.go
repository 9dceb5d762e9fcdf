package jobmode

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
	// A child that does a fixed amount of work and exits: once it is
	// reaped (the event), its CPU time is the agent's.
	cmd := exec.Command("bash", "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	s := m.sample(start.Add(time.Second))
	if s == nil || s.CPUPercent <= 0 {
		t.Errorf("a busy child's CPU did not show: %+v", s)
	}
}

func TestParseStat(t *testing.T) {
	line := "1234 (my (odd) cmd) S 42 1234 1234 0 -1 4194560 100 0 0 0 250 50 10 5 20 0 1 0 100 1000000 300 18446744073709551615"
	p, ok := parseStat(line, 4096)
	if !ok || p.ppid != 42 || p.cpu != 3*time.Second || p.reaped != 150*time.Millisecond || p.rss != 300*4096 {
		t.Errorf("parseStat = %+v %v", p, ok)
	}
}
