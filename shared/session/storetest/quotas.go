package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// RunQuotaCounts checks the session.QuotaCounts contract: the quota counters.
func RunQuotaCounts(t *testing.T, newStore func(t *testing.T) QuotaStore) {
	t.Run("creates a minute are admitted up to the limit, per tenant and minute", func(t *testing.T) {
		st := newStore(t)
		minute := time.Now().UTC().Truncate(time.Minute)
		tenant := "t-" + newID(t)[:8]
		admit := func(tenant string, minute time.Time) error {
			s := sample(t, session.Provisioning, 1)
			s.Tenant = tenant
			return st.Admit(t.Context(), s, nil, session.Admission{Minute: minute, MinuteLimit: 3})
		}
		for i := range 3 {
			if err := admit(tenant, minute); err != nil {
				t.Fatalf("create %d: %v", i+1, err)
			}
		}
		var qe *session.QuotaError
		if err := admit(tenant, minute); !errors.As(err, &qe) || qe.Quota != session.QuotaCreatesPerMinute || !errors.Is(err, session.ErrOverQuota) {
			t.Errorf("a fourth create: %v, want the creates_per_minute quota", err)
		}
		if err := admit(tenant, minute.Add(time.Minute)); err != nil {
			t.Errorf("the next minute: %v", err)
		}
		if err := admit(tenant+"x", minute); err != nil {
			t.Errorf("another tenant: %v", err)
		}
		if n, err := st.LiveCount(t.Context(), tenant); err != nil || n != 4 {
			t.Errorf("live count %d (%v), want the 4 admitted", n, err)
		}
	})
	t.Run("parallel creates pass the live limit exactly, and every end gives its slot back", func(t *testing.T) {
		st := newStore(t)
		tenant := "t-" + newID(t)[:8]
		const tries, limit = 24, 10
		var mu sync.Mutex
		var admitted []string
		refused := 0
		var wg sync.WaitGroup
		for range tries {
			wg.Go(func() {
				s := sample(t, session.Provisioning, 1)
				s.Tenant = tenant
				err := st.Admit(t.Context(), s, nil, session.Admission{LiveLimit: limit})
				mu.Lock()
				defer mu.Unlock()
				var qe *session.QuotaError
				switch {
				case err == nil:
					admitted = append(admitted, s.ID)
				case errors.As(err, &qe) && qe.Quota == session.QuotaConcurrentSessions:
					refused++
				default:
					t.Errorf("admit: %v", err)
				}
			})
		}
		wg.Wait()
		if len(admitted) != limit || refused != tries-limit {
			t.Fatalf("%d admitted, %d refused; want %d and %d", len(admitted), refused, limit, tries-limit)
		}
		if n, err := st.LiveCount(t.Context(), tenant); err != nil || n != limit {
			t.Fatalf("live count %d (%v), want %d", n, err, limit)
		}
		// Ends by every path give back one slot each, once.
		for i, id := range admitted {
			to := []session.State{session.Ended, session.Failed}[i%2]
			if _, err := st.Transition(t.Context(), id, session.Change{From: session.Live, To: to, Reason: session.ReasonShutdown}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Transition(t.Context(), id, session.Change{From: session.Live, To: session.Ended}); !errors.Is(err, session.ErrConflict) {
				t.Errorf("a second end of %s: %v, want ErrConflict", id, err)
			}
		}
		if n, err := st.LiveCount(t.Context(), tenant); err != nil || n != 0 {
			t.Errorf("after every end the live count is %d (%v), want 0", n, err)
		}
		if n, err := st.RepairLive(t.Context(), tenant, 0); err != nil || n != 0 {
			t.Errorf("repair of a right count: %d (%v), want 0", n, err)
		}
		s := sample(t, session.Provisioning, 1)
		s.Tenant = tenant
		if err := st.Admit(t.Context(), s, nil, session.Admission{LiveLimit: 1}); err != nil {
			t.Errorf("a create once all ended: %v", err)
		}
	})
	t.Run("live sessions of a tenant are counted until they are over", func(t *testing.T) {
		st := newStore(t)
		tenant := "t-" + newID(t)[:8]
		var ids []string
		for range 3 {
			s := sample(t, session.Working, 1)
			s.Tenant = tenant
			ids = append(ids, create(t, st, s).ID)
		}
		other := sample(t, session.Working, 1)
		other.Tenant = "another"
		create(t, st, other)
		if n, err := st.CountLive(t.Context(), tenant, 10); err != nil || n != 3 {
			t.Fatalf("live: %d %v, want 3", n, err)
		}
		if n, err := st.CountLive(t.Context(), tenant, 2); err != nil || n != 2 {
			t.Errorf("counted up to 2: %d %v", n, err)
		}
		if _, err := st.Transition(t.Context(), ids[0], session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonShutdown}); err != nil {
			t.Fatal(err)
		}
		if n, err := st.CountLive(t.Context(), tenant, 10); err != nil || n != 2 {
			t.Errorf("after one ended: %d %v, want 2", n, err)
		}
		if n, err := st.LiveCount(t.Context(), tenant); err != nil || n != 2 {
			t.Errorf("live count after one ended: %d %v, want 2", n, err)
		}
	})
	t.Run("open streams of a session up to the limit; closed and lapsed ones free a place", func(t *testing.T) {
		st := newStore(t)
		s := create(t, st, sample(t, session.Working, 1))
		now := time.Now()
		for _, id := range []string{"a", "b"} {
			if err := st.OpenStream(t.Context(), s.ID, id, now.Add(time.Minute), now, 2); err != nil {
				t.Fatalf("open %s: %v", id, err)
			}
		}
		if err := st.OpenStream(t.Context(), s.ID, "c", now.Add(time.Minute), now, 2); !errors.Is(err, session.ErrConflict) {
			t.Fatalf("a third stream: %v, want ErrConflict", err)
		}
		if err := st.CloseStream(t.Context(), s.ID, "a"); err != nil {
			t.Fatal(err)
		}
		if err := st.OpenStream(t.Context(), s.ID, "c", now.Add(time.Minute), now, 2); err != nil {
			t.Errorf("after a close: %v", err)
		}
		later := now.Add(2 * time.Minute)
		if err := st.OpenStream(t.Context(), s.ID, "d", later.Add(time.Minute), later, 2); err != nil {
			t.Errorf("after the others lapsed: %v", err)
		}
		if err := st.CloseStream(t.Context(), newID(t), "x"); err != nil {
			t.Errorf("close on an unknown session: %v", err)
		}
	})
	t.Run("upload grants add up to the quota, all or nothing, and only while the session lives", func(t *testing.T) {
		st := newStore(t)
		s := create(t, st, sample(t, session.Working, 1))
		q := session.UploadQuota{URLs: 3, Bytes: 100}
		if err := st.GrantUploads(t.Context(), s.ID, 2, 60, q); err != nil {
			t.Fatal(err)
		}
		if err := st.GrantUploads(t.Context(), s.ID, 1, 41, q); !errors.Is(err, session.ErrConflict) {
			t.Errorf("past the bytes: %v, want ErrConflict", err)
		}
		if err := st.GrantUploads(t.Context(), s.ID, 2, 1, q); !errors.Is(err, session.ErrConflict) {
			t.Errorf("past the URLs: %v, want ErrConflict", err)
		}
		if err := st.GrantUploads(t.Context(), s.ID, 1, 40, q); err != nil {
			t.Errorf("up to both: %v", err)
		}
		got, err := st.Get(t.Context(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.UploadURLs != 3 || got.UploadBytes != 100 {
			t.Errorf("granted %d URLs, %d bytes; want 3, 100 (refused grants add nothing)", got.UploadURLs, got.UploadBytes)
		}
		if err := st.GrantUploads(t.Context(), s.ID, 1, 0, session.UploadQuota{}); err != nil {
			t.Errorf("no bound: %v", err)
		}
		if _, err := st.Transition(t.Context(), s.ID, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonShutdown}); err != nil {
			t.Fatal(err)
		}
		if err := st.GrantUploads(t.Context(), s.ID, 1, 1, session.UploadQuota{}); !errors.Is(err, session.ErrConflict) {
			t.Errorf("an ended session: %v, want ErrConflict", err)
		}
	})
}
