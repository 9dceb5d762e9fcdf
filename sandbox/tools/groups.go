package tools

import (
	"sync"
	"syscall"
)

// running holds the process groups of the commands running now (each runs in
// a group of its own, so that a timeout kills all it started).
var running = struct {
	sync.Mutex
	groups map[int]struct{}
}{groups: map[int]struct{}{}}

// track records the process group pgid while its command runs; the returned
// func forgets it.
func track(pgid int) func() {
	running.Lock()
	running.groups[pgid] = struct{}{}
	running.Unlock()
	return func() {
		running.Lock()
		delete(running.groups, pgid)
		running.Unlock()
	}
}

// KillRunning kills the process group of every command still running: the
// agent calls it as it exits, however it was told to stop, so that no command
// of its outlives it (a group of its own is not reached by a signal to the
// agent's group).
func KillRunning() {
	running.Lock()
	defer running.Unlock()
	for pgid := range running.groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
