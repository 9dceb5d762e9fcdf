package tmux

import "time"

// Start and SetOrphanGrace open start and orphanGrace to the tests.
var Start = start

// HoldName opens holdName to the tests.
var HoldName = holdName

func SetOrphanGrace(d time.Duration) (restore func()) {
	old := orphanGrace
	orphanGrace = d
	return func() { orphanGrace = old }
}
