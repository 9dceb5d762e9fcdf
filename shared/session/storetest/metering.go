package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// RunMetering checks the session.Metering contract: a session's usage and a
// tenant's spend of the day.
func RunMetering(t *testing.T, newStore func(t *testing.T) MeteringStore) {
	t.Run("usage adds up, concurrent adds included, in any state", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Ready, 1))
		one := session.Usage{InputTokens: 12, OutputTokens: 4, CachedTokens: 3, Calls: 1}
		const n = 8
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if err := st.AddUsage(t.Context(), s.ID, one); err != nil {
					t.Errorf("add usage: %v", err)
				}
			})
		}
		wg.Wait()
		want := session.Usage{InputTokens: n * 12, OutputTokens: n * 4, CachedTokens: n * 3, Calls: n}
		if got, err := st.Get(t.Context(), s.ID); err != nil || got.Usage() != want || got.State != session.Ready {
			t.Errorf("usage %+v (state %s), %v; want %+v", got.Usage(), got.State, err, want)
		}
		ended := create(t, st, sample(t, session.Ended, 2))
		if err := st.AddUsage(t.Context(), ended.ID, one); err != nil {
			t.Errorf("add usage to an ended session: %v", err)
		}
		if got, _ := st.Get(t.Context(), ended.ID); got.Usage() != one {
			t.Errorf("usage of the ended session %+v, want %+v", got.Usage(), one)
		}
		if err := st.AddUsage(t.Context(), newID(t), one); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("add usage to an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("spend adds up per tenant and day", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		tenant := "t-" + newID(t)[:8]
		day := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
		if got, err := st.Spend(t.Context(), tenant, day); err != nil || got != 0 {
			t.Fatalf("spend before any: %d, %v; want 0", got, err)
		}
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				if err := st.AddSpend(t.Context(), tenant, day, 1500); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := st.AddSpend(t.Context(), tenant, day.Add(24*time.Hour), 7); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Spend(t.Context(), tenant, day); err != nil || got != 7500 {
			t.Errorf("spend of the day: %d, %v; want 7500", got, err)
		}
		if got, err := st.Spend(t.Context(), tenant+"x", day); err != nil || got != 0 {
			t.Errorf("another tenant's spend: %d, %v; want 0", got, err)
		}
	})
}
