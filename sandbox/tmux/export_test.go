package tmux

import "time"

// Start and SetOrphanGrace open start and orphanGrace to the tests.
var Start = start

func SetOrphanGrace(d time.Duration) (restore func()) {
	old := orphanGrace
	orphanGrace = d
	return func() { orphanGrace = old }
}
