package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// RunLifecycle checks the session.Lifecycle contract: sessions, their
// idempotency records, tokens, transitions and touches.
func RunLifecycle(t *testing.T, newStore func(t *testing.T) session.Lifecycle) {
	t.Run("create and get", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := sample(t, session.Provisioning, 1)
		if err := st.Create(t.Context(), s, nil); err != nil {
			t.Fatal(err)
		}
		got, err := st.Get(t.Context(), s.ID)
		want := s
		want.LastSeq = 1 // agent.created
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Get = %+v, %v;\nwant %+v", got, err, want)
		}
		if _, err := st.Get(t.Context(), newID(t)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Get of an unknown id: %v, want ErrNotFound", err)
		}
		dup := s
		dup.InitialPrompt = "a second create"
		if err := st.Create(t.Context(), dup, nil); err == nil {
			t.Error("a second create of the same id succeeded")
		}
		if got, _ := st.Get(t.Context(), s.ID); got.InitialPrompt != s.InitialPrompt {
			t.Errorf("a refused create overwrote the session: %+v", got)
		}
	})

	t.Run("create with an idempotency record", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := sample(t, session.Provisioning, 1)
		rec := record(t, "create", s.ID)
		if err := st.Create(t.Context(), s, &rec); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Idempotency(t.Context(), rec.Key); err != nil || got != rec {
			t.Errorf("Idempotency = %+v, %v; want %+v", got, err, rec)
		}
		other := sample(t, session.Provisioning, 1)
		reused := record(t, "create", other.ID)
		reused.Key = rec.Key
		if err := st.Create(t.Context(), other, &reused); !errors.Is(err, session.ErrIdempotencyTaken) {
			t.Errorf("create with a used key: %v, want ErrIdempotencyTaken", err)
		}
		if _, err := st.Get(t.Context(), other.ID); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("the session of a refused create was written: %v", err)
		}
		if got, _ := st.Idempotency(t.Context(), rec.Key); got.SessionID != s.ID {
			t.Errorf("a refused create replaced the record: %+v", got)
		}
		if _, err := st.Idempotency(t.Context(), "create#"+newID(t)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Idempotency of an unknown key: %v, want ErrNotFound", err)
		}
	})

	t.Run("remember a record on its own, once", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 1))
		rec := record(t, "create", s.ID)
		if err := st.Remember(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Idempotency(t.Context(), rec.Key); err != nil || got != rec {
			t.Errorf("Idempotency = %+v, %v; want %+v", got, err, rec)
		}
		again := rec
		again.SessionID = newID(t)
		if err := st.Remember(t.Context(), again); !errors.Is(err, session.ErrIdempotencyTaken) {
			t.Errorf("remember a used key: %v, want ErrIdempotencyTaken", err)
		}
		if got, _ := st.Idempotency(t.Context(), rec.Key); got.SessionID != s.ID {
			t.Errorf("a refused remember replaced the record: %+v", got)
		}
	})

	t.Run("transition checks state and generation", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 2))
		before := time.Now()
		ready := before.UTC()
		got, err := st.Transition(t.Context(), s.ID, session.Change{
			From: []session.State{session.Provisioning}, To: session.Ready, Generation: 2,
			Set: session.Fields{ReadyAt: before, GuardrailsHash: "gh"},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := s
		want.State, want.ReadyAt, want.GuardrailsHash, want.UpdatedAt = session.Ready, ready, "gh", got.UpdatedAt
		want.LastSeq = 2                                          // agent.created, agent.ready
		want.DueAt = toMilli(ready.Add(session.HeartbeatTimeout)) // ready is life: the next heartbeat is due
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Transition = %+v;\nwant %+v", got, want)
		}
		notBefore(t, "updated_at", got.UpdatedAt, before)
		if read, err := st.Get(t.Context(), s.ID); err != nil || !reflect.DeepEqual(read, got) {
			t.Errorf("Get after Transition = %+v, %v;\nwant %+v", read, err, got)
		}

		refused := []struct {
			name string
			c    session.Change
		}{
			{"from a state it is not in", session.Change{From: []session.State{session.Provisioning}, To: session.Ready}},
			{"of another generation", session.Change{From: session.Running, To: session.Working, Generation: 1}},
		}
		for _, r := range refused {
			if _, err := st.Transition(t.Context(), s.ID, r.c); !errors.Is(err, session.ErrConflict) {
				t.Errorf("transition %s: %v, want ErrConflict", r.name, err)
			}
		}
		if read, _ := st.Get(t.Context(), s.ID); !reflect.DeepEqual(read, got) {
			t.Errorf("a refused transition wrote: %+v", read)
		}
		// Generation 0 is any generation.
		if got, err := st.Transition(t.Context(), s.ID, session.Change{From: session.Running, To: session.Working}); err != nil || got.State != session.Working {
			t.Errorf("transition of any generation: %+v, %v", got, err)
		}
		if _, err := st.Transition(t.Context(), newID(t), session.Change{From: session.Live, To: session.Failed}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("transition of an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("pause and resume: the checkpoint kept, the next launch's generation", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Idle, 3))
		if _, err := st.Touch(t.Context(), s.ID, 3, session.Fields{SandboxRef: "pid:1", HeartbeatAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		pausing, err := st.Transition(t.Context(), s.ID, session.Change{From: session.Running, To: session.Pausing, Generation: 3})
		if err != nil || pausing.State != session.Pausing || pausing.DueAt.Before(before.Add(session.PausingLimit-time.Second)) {
			t.Fatalf("pausing: %+v, %v; want due within the pausing limit", pausing, err)
		}
		pausedAt := time.Now().UTC().Truncate(time.Millisecond)
		paused, err := st.Transition(t.Context(), s.ID, session.Change{From: []session.State{session.Pausing}, To: session.Paused, Generation: 3,
			Set: session.Fields{CheckpointID: "cp_1", PausedAt: pausedAt}})
		if err != nil || paused.State != session.Paused || paused.CheckpointID != "cp_1" || !paused.PausedAt.Equal(pausedAt) || !paused.DueAt.IsZero() ||
			paused.SandboxRef != "pid:1" || !slices.Contains(session.Live, paused.State) {
			t.Fatalf("paused: %+v, %v; want the checkpoint, no due time, the sandbox still named (to stop it)", paused, err)
		}
		resuming, err := st.Transition(t.Context(), s.ID, session.Change{From: []session.State{session.Paused}, To: session.Resuming, Generation: 3,
			Set: session.Fields{PausedFor: 1500 * time.Millisecond}})
		if err != nil || resuming.State != session.Resuming || resuming.Generation != 4 || resuming.SandboxRef != "" || resuming.SandboxTokenHash != "" ||
			!resuming.LaunchLease.IsZero() || resuming.CheckpointID != "cp_1" || resuming.PausedFor != 1500*time.Millisecond || resuming.DueAt.IsZero() {
			t.Fatalf("resuming: %+v, %v; want generation 4, nothing of the last launch, the checkpoint and the paused time kept, due", resuming, err)
		}
		if read, err := st.Get(t.Context(), s.ID); err != nil || !reflect.DeepEqual(read, resuming) {
			t.Errorf("Get after the resume = %+v, %v;\nwant %+v", read, err, resuming)
		}
		if _, err := st.Transition(t.Context(), s.ID, session.Change{From: []session.State{session.Paused}, To: session.Resuming, Generation: 3}); !errors.Is(err, session.ErrConflict) {
			t.Errorf("a second resume of the same pause: %v, want ErrConflict", err)
		}
	})

	t.Run("terminal transition sets the end and keeps the reason", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Working, 1))
		if _, err := st.Transition(t.Context(), s.ID, session.Change{From: session.Running, To: session.Ending, Reason: session.ReasonShutdown}); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		got, err := st.Transition(t.Context(), s.ID, session.Change{From: session.Live, To: session.Ended})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != session.Ended || got.Reason != session.ReasonShutdown {
			t.Errorf("ended with %s/%q; a change without a reason keeps the one there", got.State, got.Reason)
		}
		notBefore(t, "ended_at", got.EndedAt, before)
		if _, err := st.Transition(t.Context(), s.ID, session.Change{From: session.Live, To: session.Failed, Reason: session.ReasonError}); !errors.Is(err, session.ErrConflict) {
			t.Errorf("transition out of a terminal state: %v, want ErrConflict", err)
		}
	})

	t.Run("concurrent transitions from one state: one wins", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 1))
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, errs[i] = st.Transition(t.Context(), s.ID, session.Change{
					From: []session.State{session.Provisioning}, To: session.Ready, Generation: 1,
					Set: session.Fields{ReadyAt: time.Unix(int64(i), 0), SandboxRef: fmt.Sprint(i)},
				})
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, session.ErrConflict):
				t.Errorf("transition %d: %v", i, err)
			}
		}
		if won != 1 {
			t.Errorf("%d of %d concurrent transitions from provisioning succeeded, want 1", won, n)
		}
	})

	t.Run("add token up to the limit", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Ready, 1))
		want := slices.Clone(s.TokenHashes)
		for i := len(want); i < session.MaxTokens; i++ {
			h := fmt.Sprintf("hash-%d", i)
			if err := st.AddToken(t.Context(), s.ID, h); err != nil {
				t.Fatalf("token %d: %v", i, err)
			}
			want = append(want, h)
		}
		if err := st.AddToken(t.Context(), s.ID, "one-too-many"); !errors.Is(err, session.ErrConflict) {
			t.Errorf("token %d: %v, want ErrConflict", session.MaxTokens+1, err)
		}
		if got, _ := st.Get(t.Context(), s.ID); !slices.Equal(got.TokenHashes, want) {
			t.Errorf("token hashes %v, want %v", got.TokenHashes, want)
		}

		none := sample(t, session.Provisioning, 1)
		none.TokenHashes = nil
		create(t, st, none)
		if err := st.AddToken(t.Context(), none.ID, "first"); err != nil {
			t.Errorf("first token of a session holding none: %v", err)
		}
		if got, _ := st.Get(t.Context(), none.ID); !slices.Equal(got.TokenHashes, []string{"first"}) {
			t.Errorf("token hashes %v, want [first]", got.TokenHashes)
		}
		ended := create(t, st, sample(t, session.Ended, 1))
		if err := st.AddToken(t.Context(), ended.ID, "late"); !errors.Is(err, session.ErrConflict) {
			t.Errorf("token for an ended session: %v, want ErrConflict", err)
		}
		if err := st.AddToken(t.Context(), newID(t), "h"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("token for an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("set egress changes a live session's policy of its version", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		initial := egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"a.example.com", "b.example.com"}}
		in := sample(t, session.Working, 1)
		in.Egress = &initial
		s := create(t, st, in)
		if read, _ := st.Get(t.Context(), s.ID); !reflect.DeepEqual(read.Egress, &initial) || read.EgressVersion != 0 {
			t.Fatalf("created with egress %+v (version %d)", read.Egress, read.EgressVersion)
		}
		narrow := egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"a.example.com"}}
		got, err := st.SetEgress(t.Context(), s.ID, 0, narrow)
		if err != nil || !reflect.DeepEqual(got.Egress, &narrow) || got.EgressVersion != 1 {
			t.Fatalf("SetEgress = %+v (version %d), %v", got.Egress, got.EgressVersion, err)
		}
		// A change made on the version before is refused: it lost the race.
		if _, err := st.SetEgress(t.Context(), s.ID, 0, egress.Open()); !errors.Is(err, session.ErrConflict) {
			t.Errorf("stale version: %v, want ErrConflict", err)
		}
		if read, _ := st.Get(t.Context(), s.ID); !reflect.DeepEqual(read.Egress, &narrow) || read.EgressVersion != 1 {
			t.Errorf("after a refused change: %+v (version %d)", read.Egress, read.EgressVersion)
		}
		ended := create(t, st, sample(t, session.Ended, 1))
		if _, err := st.SetEgress(t.Context(), ended.ID, 0, narrow); !errors.Is(err, session.ErrConflict) {
			t.Errorf("ended session: %v, want ErrConflict", err)
		}
	})

	t.Run("set ends at: set, extended, never shortened by an extension", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Ready, 1))
		base := time.Now().UTC().Truncate(time.Millisecond)
		got, err := st.SetEndsAt(t.Context(), s.ID, base.Add(time.Minute), true)
		if err != nil || !got.EndsAt.Equal(base.Add(time.Minute)) {
			t.Fatalf("first end: %s, %v", got.EndsAt, err)
		}
		if _, err := st.SetEndsAt(t.Context(), s.ID, base.Add(time.Second), true); !errors.Is(err, session.ErrConflict) {
			t.Errorf("an extension to an earlier end: %v, want ErrConflict", err)
		}
		if _, err := st.SetEndsAt(t.Context(), s.ID, base.Add(time.Minute), true); !errors.Is(err, session.ErrConflict) {
			t.Errorf("an extension to the same end: %v, want ErrConflict", err)
		}
		if got, err := st.SetEndsAt(t.Context(), s.ID, base.Add(2*time.Minute), true); err != nil || !got.EndsAt.Equal(base.Add(2*time.Minute)) {
			t.Errorf("a later end: %s, %v", got.EndsAt, err)
		}
		if got, err := st.SetEndsAt(t.Context(), s.ID, base.Add(time.Second), false); err != nil || !got.EndsAt.Equal(base.Add(time.Second)) {
			t.Errorf("a set to an earlier end: %s, %v", got.EndsAt, err)
		}
		if read, _ := st.Get(t.Context(), s.ID); !read.EndsAt.Equal(base.Add(time.Second)) {
			t.Errorf("read back: %s", read.EndsAt)
		}
		ended := create(t, st, sample(t, session.Ended, 1))
		if _, err := st.SetEndsAt(t.Context(), ended.ID, base, false); !errors.Is(err, session.ErrConflict) {
			t.Errorf("ended session: %v, want ErrConflict", err)
		}
	})

	t.Run("touch sets fields of a live session of its generation", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Working, 3))
		before := time.Now()
		beat := before.UTC()
		use := &sandboxwire.ResourceSample{CPUPercent: 12.5, MemoryMB: 256}
		got, err := st.Touch(t.Context(), s.ID, 3, session.Fields{HeartbeatAt: before, SandboxRef: "pid:42", Resources: use, RateLimitedAt: before,
			ClaimBy: before.Add(session.UnclaimedLimit), ClaimedAt: before, WorkspaceDropped: "launched without its workspace"})
		if err != nil {
			t.Fatal(err)
		}
		want := s
		want.HeartbeatAt, want.SandboxRef, want.UpdatedAt = beat, "pid:42", got.UpdatedAt
		want.Resources, want.RateLimitedAt = use, beat
		want.WorkspaceDropped = "launched without its workspace"
		want.ClaimBy, want.ClaimedAt = beat.Add(session.UnclaimedLimit), beat
		want.DueAt = toMilli(beat.Add(session.HeartbeatTimeout))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Touch = %+v;\nwant %+v", got, want)
		}
		notBefore(t, "updated_at", got.UpdatedAt, before)
		if read, _ := st.Get(t.Context(), s.ID); !reflect.DeepEqual(read, got) {
			t.Errorf("Get after Touch = %+v;\nwant %+v", read, got)
		}
		if _, err := st.Touch(t.Context(), s.ID, 2, session.Fields{HeartbeatAt: before.Add(-time.Hour)}); !errors.Is(err, session.ErrConflict) {
			t.Errorf("touch of another generation: %v, want ErrConflict", err)
		}
		if read, _ := st.Get(t.Context(), s.ID); !read.HeartbeatAt.Equal(beat) {
			t.Errorf("a refused touch wrote heartbeat_at %s", read.HeartbeatAt)
		}
		ending := create(t, st, sample(t, session.Ending, 1))
		if _, err := st.Touch(t.Context(), ending.ID, 1, session.Fields{HeartbeatAt: before}); err != nil {
			t.Errorf("touch of an ending session: %v", err)
		}
		failed := create(t, st, sample(t, session.Failed, 1))
		if _, err := st.Touch(t.Context(), failed.ID, 1, session.Fields{HeartbeatAt: before}); !errors.Is(err, session.ErrConflict) {
			t.Errorf("touch of a failed session: %v, want ErrConflict", err)
		}
		if _, err := st.Touch(t.Context(), newID(t), 1, session.Fields{HeartbeatAt: before}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("touch of an unknown id: %v, want ErrNotFound", err)
		}
	})

}
