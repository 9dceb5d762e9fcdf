package process

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// TestCgroupFiles: a sandbox's cgroup gets memory.max in bytes and cpu.max
// as a quota per 100 ms period; a directory that is no cgroup v2 is none.
func TestCgroupFiles(t *testing.T) {
	t.Parallel()
	// A directory standing in for a delegated cgroup (cgroupfs makes the
	// controller files itself; here they are written as plain files).
	parent := t.TempDir()
	dir, err := makeCgroup(parent, "ra-s1-1", tasksize.Size{CPUUnits: 512, MemoryMiB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"memory.max": "1073741824", "cpu.max": "50000 100000"} {
		if got, err := os.ReadFile(filepath.Join(dir, file)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", file, got, err, want)
		}
	}
	if _, err := makeCgroup(parent, "ra-s2-1", tasksize.Size{}); err == nil {
		t.Error("a cgroup for a sandbox without a size")
	}
	if got := detectCgroup(parent); got != "" {
		t.Errorf("detectCgroup(%s) = %q: not a cgroup v2 directory", parent, got)
	}
	if gomaxprocs(256) != "1" || gomaxprocs(4096) != "4" || gomaxprocs(0) != "" {
		t.Error("gomaxprocs")
	}
}

// A cgroup whose memory.events counts an OOM kill says so; one that counts
// none, or has no such file, does not.
func TestOOMKilled(t *testing.T) {
	dir := t.TempDir()
	if oomKilled(dir) || oomKilled("") {
		t.Error("no memory.events: killed")
	}
	for events, want := range map[string]bool{
		"low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n": true,
		"low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n":                   false,
	} {
		if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte(events), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := oomKilled(dir); got != want {
			t.Errorf("%q: %v, want %v", events, got, want)
		}
	}
}
