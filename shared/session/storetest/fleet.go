package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// RunFleet checks the session.Fleet contract: the fleet list's and the sweep's queries.
func RunFleet(t *testing.T, newStore func(t *testing.T) FleetStore) {
	t.Run("list by tenant", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		tenant, other := "t-"+newID(t)[:8], "t-"+newID(t)[:8]
		base := time.Now().UTC().Add(-time.Hour)
		var want []string // newest first
		for i := range 7 {
			s := sample(t, session.Ready, 1)
			s.Tenant, s.CreatedAt = tenant, base.Add(time.Duration(i)*time.Second)
			if i%2 == 0 {
				s.State, s.Reason = session.Ended, session.ReasonShutdown
			}
			create(t, st, s)
			want = append([]string{s.ID}, want...)
			o := sample(t, session.Ready, 1)
			o.Tenant, o.CreatedAt = other, base
			create(t, st, o)
		}
		untenanted := sample(t, session.Ready, 1) // of no tenant: in no list
		untenanted.Tenant = ""
		create(t, st, untenanted)
		var got []string
		cursor := ""
		for range 10 {
			page, next, err := st.ListByTenant(t.Context(), tenant, session.ListFilter{}, 3, cursor)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page {
				got = append(got, s.ID)
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("listed %v, want %v", got, want)
		}
		page, _, err := st.ListByTenant(t.Context(), tenant, session.ListFilter{States: []session.State{session.Ready}}, 7, "")
		if err != nil || len(page) != 3 {
			t.Errorf("ready ones: %d, %v; want 3", len(page), err)
		}
		_, theirs, err := st.ListByTenant(t.Context(), other, session.ListFilter{}, 2, "")
		if err != nil || theirs == "" {
			t.Fatalf("other's first page: %q, %v", theirs, err)
		}
		if _, _, err := st.ListByTenant(t.Context(), tenant, session.ListFilter{}, 2, theirs); !errors.Is(err, session.ErrBadCursor) {
			t.Errorf("another tenant's cursor: %v, want ErrBadCursor", err)
		}
	})

	t.Run("the sweep's due sessions", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		shard := session.WatchShard(newID(t))
		now := time.Now().UTC()
		mk := func(state session.State, due time.Time) session.Session {
			s := sample(t, state, 1)
			for session.WatchShard(s.ID) != shard {
				s.ID = newID(t)
			}
			s.DueAt = due
			return create(t, st, s)
		}
		unwatched := sample(t, session.Ready, 1) // no due time: not watched
		for session.WatchShard(unwatched.ID) != shard {
			unwatched.ID = newID(t)
		}
		create(t, st, unwatched)
		overdue := mk(session.Ready, now.Add(-2*time.Minute))
		late := mk(session.Working, now.Add(-time.Minute))
		ending := mk(session.Idle, now.Add(-time.Second))
		fine := mk(session.Ready, now.Add(time.Minute))
		due := func() []string {
			t.Helper()
			ids, err := st.Due(t.Context(), shard, now, 10)
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
		if got := due(); !slices.Equal(got, []string{overdue.ID, late.ID, ending.ID}) {
			t.Errorf("due %v, want the three overdue, most overdue first", got)
		}
		if ids, err := st.Due(t.Context(), shard, now, 1); err != nil || !slices.Equal(ids, []string{overdue.ID}) {
			t.Errorf("limit 1: %v, %v", ids, err)
		}
		// A heartbeat makes it due HeartbeatTimeout later; ending, EndingLimit
		// later; the end takes it out of the index.
		if _, err := st.Touch(t.Context(), late.ID, 1, session.Fields{HeartbeatAt: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(t.Context(), ending.ID, session.Change{From: session.Running, To: session.Ending, Reason: session.ReasonShutdown}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(t.Context(), overdue.ID, session.Change{From: session.Running, To: session.Ended, Reason: session.ReasonLost}); err != nil {
			t.Fatal(err)
		}
		if got := due(); len(got) != 0 {
			t.Errorf("due after heartbeat, ending and end: %v", got)
		}
		for id, want := range map[string]time.Duration{late.ID: session.HeartbeatTimeout, ending.ID: session.EndingLimit} {
			s, _ := st.Get(t.Context(), id)
			if d := s.DueAt.Sub(now); d < want-time.Minute || d > want+time.Minute {
				t.Errorf("%s due in %s, want about %s", s.State, d, want)
			}
		}
		if s, _ := st.Get(t.Context(), overdue.ID); !s.DueAt.IsZero() {
			t.Errorf("an ended session still due at %s", s.DueAt)
		}
		if ids, _ := st.Due(t.Context(), shard, now.Add(time.Hour), 10); !slices.Contains(ids, fine.ID) || slices.Contains(ids, overdue.ID) || slices.Contains(ids, unwatched.ID) {
			t.Errorf("due in an hour: %v", ids)
		}
	})
}
