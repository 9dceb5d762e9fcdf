package session

import "time"

// GapGrace is how long a reader waits for a missing sequence number before it
// reads past it. Sequence numbers are allocated before their events are written,
// so two concurrent appends can land out of order: a reader that jumped over the
// first would never see it. A number whose append failed is never written; after
// GapGrace it is skipped.
const GapGrace = 5 * time.Second

// Contiguous returns the events of evs (in sequence order, all after after) that a
// reader at cursor after may deliver now: those that follow after without a gap,
// and past a gap only once the event after it is older than GapGrace.
func Contiguous(evs []Event, after int64, now time.Time) []Event {
	next := after + 1
	for i, e := range evs {
		if e.Seq != next {
			if e.At.IsZero() || now.Sub(e.At) < GapGrace {
				return evs[:i]
			}
		}
		next = e.Seq + 1
	}
	return evs
}
