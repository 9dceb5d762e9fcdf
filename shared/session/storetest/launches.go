package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// claim is a launch claim of code hash hash whose lease and code both end at until.
func claim(hash string, until time.Time) session.LaunchClaim {
	return session.LaunchClaim{BootstrapCodeHash: hash, CodeExpires: until, LeaseUntil: until}
}

// RunLaunches checks the session.Launches contract: launch claims and the
// bootstrap code's exchange.
func RunLaunches(t *testing.T, newStore func(t *testing.T) LaunchStore) {
	t.Run("claim launch", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 2))
		lease := time.Now().Add(time.Minute)
		if err := st.ClaimLaunch(t.Context(), s.ID, 1, claim("old", lease)); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim of an old generation: %v, want ErrConflict", err)
		}
		if err := st.ClaimLaunch(t.Context(), s.ID, 2, claim("sandbox-1", lease)); err != nil {
			t.Fatal(err)
		}
		got, _ := st.Get(t.Context(), s.ID)
		if got.BootstrapCodeHash != "sandbox-1" || !got.LaunchLease.Equal(toMilli(lease)) || got.State != session.Provisioning {
			t.Errorf("after claim: hash %q, lease %s (want %s), state %s", got.BootstrapCodeHash, got.LaunchLease, toMilli(lease), got.State)
		}
		if err := st.ClaimLaunch(t.Context(), s.ID, 2, claim("sandbox-2", lease)); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim while a lease runs: %v, want ErrConflict", err)
		}
		if got, _ := st.Get(t.Context(), s.ID); got.BootstrapCodeHash != "sandbox-1" {
			t.Errorf("a refused claim replaced the bootstrap code hash: %q", got.BootstrapCodeHash)
		}

		if err := st.ClaimLaunch(t.Context(), s.ID, 3, claim("sandbox-3", lease)); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim of the next generation while a lease runs: %v, want ErrConflict", err)
		}

		// A claim whose lease ran out is replaced by the claim of the next
		// generation, never by another claim of its own: the sandbox it may have
		// started holds its token.
		expired := create(t, st, sample(t, session.Provisioning, 1))
		if err := st.ClaimLaunch(t.Context(), expired.ID, 1, claim("a", time.Now().Add(-time.Second))); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimLaunch(t.Context(), expired.ID, 1, claim("b", lease)); !errors.Is(err, session.ErrConflict) {
			t.Errorf("second claim of generation 1: %v, want ErrConflict", err)
		}
		if err := st.ClaimLaunch(t.Context(), expired.ID, 3, claim("b", lease)); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim of generation 3 after generation 1: %v, want ErrConflict", err)
		}
		if err := st.ClaimLaunch(t.Context(), expired.ID, 2, claim("b", lease)); err != nil {
			t.Fatalf("claim of generation 2 after the lease of 1 ran out: %v", err)
		}
		got, _ = st.Get(t.Context(), expired.ID)
		if got.Generation != 2 || got.BootstrapCodeHash != "b" || !got.LaunchLease.Equal(toMilli(lease)) || got.State != session.Provisioning {
			t.Errorf("after the replacing claim: generation %d, hash %q, lease %s (want %s), state %s",
				got.Generation, got.BootstrapCodeHash, got.LaunchLease, toMilli(lease), got.State)
		}
		if err := st.ClaimLaunch(t.Context(), expired.ID, 3, claim("c", lease)); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim while the replacing lease runs: %v, want ErrConflict", err)
		}
		// Once a sandbox was launched for it, never again.
		launched := create(t, st, sample(t, session.Provisioning, 1))
		if _, err := st.Touch(t.Context(), launched.ID, 1, session.Fields{SandboxRef: "ref-1"}); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimLaunch(t.Context(), launched.ID, 1, claim("c", lease)); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim of a launched session: %v, want ErrConflict", err)
		}
		ready := create(t, st, sample(t, session.Ready, 1))
		if err := st.ClaimLaunch(t.Context(), ready.ID, 1, claim("d", lease)); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim of a ready session: %v, want ErrConflict", err)
		}
		if err := st.ClaimLaunch(t.Context(), newID(t), 1, claim("e", lease)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("claim of an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("a claim removes the sandbox token of the generation it replaces", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 1))
		lost := session.LaunchClaim{BootstrapCodeHash: "code-1", CodeExpires: time.Now().Add(time.Minute), LeaseUntil: time.Now().Add(-time.Second)}
		if err := st.ClaimLaunch(t.Context(), s.ID, 1, lost); err != nil {
			t.Fatal(err)
		}
		// The lost claim's sandbox spent its code before the lease ran out.
		if err := st.RedeemBootstrap(t.Context(), s.ID, 1, "code-1", "token-1"); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimLaunch(t.Context(), s.ID, 2, claim("code-2", time.Now().Add(time.Minute))); err != nil {
			t.Fatal(err)
		}
		got, _ := st.Get(t.Context(), s.ID)
		if got.SandboxTokenHash != "" || got.BootstrapCodeHash != "code-2" || got.Generation != 2 {
			t.Errorf("after the replacing claim: token hash %q, code hash %q, generation %d", got.SandboxTokenHash, got.BootstrapCodeHash, got.Generation)
		}
	})

	t.Run("a bootstrap code is spent once", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 1))
		lease := time.Now().Add(time.Minute)
		if err := st.ClaimLaunch(t.Context(), s.ID, 1, claim("code", lease)); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []struct {
			name string
			gen  int
			code string
		}{{"another code", 1, "other"}, {"another generation", 2, "code"}, {"no code", 1, ""}} {
			if err := st.RedeemBootstrap(t.Context(), s.ID, bad.gen, bad.code, "t"); !errors.Is(err, session.ErrConflict) {
				t.Errorf("%s: %v, want ErrConflict", bad.name, err)
			}
		}
		// Of two exchanges at once, one wins.
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = st.RedeemBootstrap(t.Context(), s.ID, 1, "code", fmt.Sprintf("token-%d", i)) })
		}
		wg.Wait()
		won := slices.IndexFunc(errs, func(err error) bool { return err == nil })
		if won < 0 || !errors.Is(errs[1-won], session.ErrConflict) {
			t.Fatalf("two exchanges of one code: %v", errs)
		}
		got, _ := st.Get(t.Context(), s.ID)
		if got.SandboxTokenHash != fmt.Sprintf("token-%d", won) || got.BootstrapCodeHash != "" || !got.BootstrapExpires.IsZero() || got.State != session.Provisioning {
			t.Errorf("after the exchange: %+v", got)
		}
		if err := st.RedeemBootstrap(t.Context(), s.ID, 1, "code", "again"); !errors.Is(err, session.ErrConflict) {
			t.Errorf("a spent code: %v, want ErrConflict", err)
		}
		if got, _ := st.Get(t.Context(), s.ID); got.SandboxTokenHash != fmt.Sprintf("token-%d", won) {
			t.Errorf("a refused exchange replaced the token hash: %q", got.SandboxTokenHash)
		}

		expired := create(t, st, sample(t, session.Provisioning, 1))
		if err := st.ClaimLaunch(t.Context(), expired.ID, 1, session.LaunchClaim{BootstrapCodeHash: "code", CodeExpires: time.Now().Add(-time.Second), LeaseUntil: lease}); err != nil {
			t.Fatal(err)
		}
		if err := st.RedeemBootstrap(t.Context(), expired.ID, 1, "code", "t"); !errors.Is(err, session.ErrConflict) {
			t.Errorf("an expired code: %v, want ErrConflict", err)
		}
		over := create(t, st, sample(t, session.Provisioning, 1))
		if err := st.ClaimLaunch(t.Context(), over.ID, 1, claim("code", lease)); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(t.Context(), over.ID, session.Change{From: session.Live, To: session.Failed}); err != nil {
			t.Fatal(err)
		}
		if err := st.RedeemBootstrap(t.Context(), over.ID, 1, "code", "t"); !errors.Is(err, session.ErrConflict) {
			t.Errorf("the code of a failed session: %v, want ErrConflict", err)
		}
		if err := st.RedeemBootstrap(t.Context(), newID(t), 1, "code", "t"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("an unknown id: %v, want ErrNotFound", err)
		}
	})

}
