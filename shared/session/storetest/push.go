package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// RunPushConnections checks the session.PushConnections contract: set for the current generation of a live
// session only, cleared only while the session still holds that connection,
// and forgotten by a new launch claim.
func RunPushConnections(t *testing.T, newStore func(t *testing.T) PushStore) {
	t.Run("a push connection is set for its generation and cleared by its id", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Ready, 2))
		ctx, expires := t.Context(), time.Now().Add(time.Hour)
		conn := func() string {
			t.Helper()
			got, err := st.Get(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.PushConnectionID
		}
		if err := st.SetPushConnection(ctx, s.ID, 1, "old-gen=", expires); !errors.Is(err, session.ErrConflict) {
			t.Errorf("set for another generation: %v, want ErrConflict", err)
		}
		if err := st.SetPushConnection(ctx, s.ID, 2, "first=", expires); err != nil || conn() != "first=" {
			t.Fatalf("set: %v, holds %q", err, conn())
		}
		// A reconnect replaces it; the first one's close then leaves it.
		if err := st.SetPushConnection(ctx, s.ID, 2, "second=", expires); err != nil {
			t.Fatal(err)
		}
		if err := st.ClearPushConnection(ctx, "first="); err != nil || conn() != "second=" {
			t.Errorf("clear of a replaced connection: %v, holds %q", err, conn())
		}
		if err := st.ClearPushConnection(ctx, "second="); err != nil || conn() != "" {
			t.Errorf("clear: %v, holds %q", err, conn())
		}
		if err := st.ClearPushConnection(ctx, "never-seen="); err != nil {
			t.Errorf("clear of an unknown connection: %v", err)
		}
		if _, err := st.Transition(ctx, s.ID, session.Change{From: session.Running, To: session.Ended, Reason: session.ReasonIdle}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetPushConnection(ctx, s.ID, 2, "late=", expires); !errors.Is(err, session.ErrConflict) {
			t.Errorf("set on an ended session: %v, want ErrConflict", err)
		}
	})

	t.Run("a launch claim forgets the push connection", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 1))
		if err := st.SetPushConnection(t.Context(), s.ID, 1, "conn=", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimLaunch(t.Context(), s.ID, 1, claim("code", time.Now().Add(time.Minute))); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.Get(t.Context(), s.ID); got.PushConnectionID != "" {
			t.Errorf("after a claim: %q", got.PushConnectionID)
		}
	})
}
