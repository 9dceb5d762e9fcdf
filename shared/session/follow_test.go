package session

import (
	"testing"
	"time"
)

func TestContiguousHoldsBackPastAGap(t *testing.T) {
	now := time.Now()
	fresh := now.Add(-time.Second)
	old := now.Add(-GapGrace - time.Second)
	ev := func(seq int64, at time.Time) Event { return Event{Seq: seq, At: at} }
	seqs := func(evs []Event) []int64 {
		var out []int64
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	cases := []struct {
		name  string
		evs   []Event
		after int64
		want  []int64
	}{
		{"in order", []Event{ev(4, fresh), ev(5, fresh)}, 3, []int64{4, 5}},
		{"gap at the front, fresh", []Event{ev(5, fresh), ev(6, fresh)}, 3, nil},
		{"gap in the middle, fresh", []Event{ev(4, fresh), ev(6, fresh)}, 3, []int64{4}},
		{"gap past the grace", []Event{ev(4, fresh), ev(6, old), ev(7, fresh)}, 3, []int64{4, 6, 7}},
		{"nothing", nil, 3, nil},
	}
	for _, c := range cases {
		if got := seqs(Contiguous(c.evs, c.after, now)); len(got) != len(c.want) || (len(got) > 0 && got[len(got)-1] != c.want[len(c.want)-1]) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
