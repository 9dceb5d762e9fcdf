// Package storetest is the contract of session.Store, run against every
// implementation: Run checks a store against the interface's documented
// behaviour, and Memory, an in-memory store for unit tests of logic, passes it as
// dynamo.Sessions does against DynamoDB Local.
package storetest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// Run checks the store newStore returns against the session.Store contract. Each
// subtest calls newStore once and runs in parallel with the others; subtests use
// fresh session ids and keys, so newStore may return the same store every time.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	t.Run("create and get", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := sample(t, session.Provisioning, 1)
		if err := st.Create(t.Context(), s, nil); err != nil {
			t.Fatal(err)
		}
		got, err := st.Get(t.Context(), s.ID)
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Errorf("Get = %+v, %v;\nwant %+v", got, err, s)
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

	t.Run("transition checks state and generation", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 2))
		before := time.Now()
		ready := stamp(before)
		got, err := st.Transition(t.Context(), s.ID, session.Change{
			From: []session.State{session.Provisioning}, To: session.Ready, Generation: 2,
			Set: map[string]any{"ready_at": ready, "guardrails_version_hash": "gh"},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := s
		want.State, want.ReadyAt, want.GuardrailsHash, want.UpdatedAt = session.Ready, ready, "gh", got.UpdatedAt
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

	t.Run("terminal transition sets end and expiry", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Working, 1))
		if _, err := st.Transition(t.Context(), s.ID, session.Change{From: session.Running, To: session.Ending, Reason: session.ReasonShutdown}); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		got, err := st.Transition(t.Context(), s.ID, session.Change{From: session.Live, To: session.Ended})
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if got.State != session.Ended || got.Reason != session.ReasonShutdown {
			t.Errorf("ended with %s/%q; a change without a reason keeps the one there", got.State, got.Reason)
		}
		notBefore(t, "ended_at", got.EndedAt, before)
		if lo, hi := before.Add(session.Retention).Unix(), after.Add(session.Retention).Unix(); got.ExpiresAt < lo || got.ExpiresAt > hi {
			t.Errorf("expires_at %d, want the retention from now, in [%d, %d]", got.ExpiresAt, lo, hi)
		}
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
					Set: map[string]any{"ready_at": fmt.Sprint(i)},
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

	t.Run("claim launch", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Provisioning, 2))
		lease := time.Now().Add(time.Minute)
		if err := st.ClaimLaunch(t.Context(), s.ID, 1, "old", lease); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim of an old generation: %v, want ErrConflict", err)
		}
		if err := st.ClaimLaunch(t.Context(), s.ID, 2, "sandbox-1", lease); err != nil {
			t.Fatal(err)
		}
		got, _ := st.Get(t.Context(), s.ID)
		if got.SandboxTokenHash != "sandbox-1" || got.LaunchLease != lease.UnixMilli() || got.State != session.Provisioning {
			t.Errorf("after claim: hash %q, lease %d (want %d), state %s", got.SandboxTokenHash, got.LaunchLease, lease.UnixMilli(), got.State)
		}
		if err := st.ClaimLaunch(t.Context(), s.ID, 2, "sandbox-2", lease); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim while a lease runs: %v, want ErrConflict", err)
		}
		if got, _ := st.Get(t.Context(), s.ID); got.SandboxTokenHash != "sandbox-1" {
			t.Errorf("a refused claim replaced the sandbox token hash: %q", got.SandboxTokenHash)
		}

		// A lease that ran out may be claimed again.
		expired := create(t, st, sample(t, session.Provisioning, 1))
		if err := st.ClaimLaunch(t.Context(), expired.ID, 1, "a", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimLaunch(t.Context(), expired.ID, 1, "b", lease); err != nil {
			t.Errorf("claim after the lease ran out: %v", err)
		}
		// Once a sandbox was launched for it, never again.
		launched := create(t, st, sample(t, session.Provisioning, 1))
		if _, err := st.Touch(t.Context(), launched.ID, 1, map[string]any{"sandbox_ref": "ref-1"}); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimLaunch(t.Context(), launched.ID, 1, "c", lease); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim of a launched session: %v, want ErrConflict", err)
		}
		ready := create(t, st, sample(t, session.Ready, 1))
		if err := st.ClaimLaunch(t.Context(), ready.ID, 1, "d", lease); !errors.Is(err, session.ErrConflict) {
			t.Errorf("claim of a ready session: %v, want ErrConflict", err)
		}
		if err := st.ClaimLaunch(t.Context(), newID(t), 1, "e", lease); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("claim of an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("touch sets fields of a live session of its generation", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Working, 3))
		before := time.Now()
		beat := stamp(before)
		got, err := st.Touch(t.Context(), s.ID, 3, map[string]any{"heartbeat_at": beat, "sandbox_ref": "pid:42"})
		if err != nil {
			t.Fatal(err)
		}
		want := s
		want.HeartbeatAt, want.SandboxRef, want.UpdatedAt = beat, "pid:42", got.UpdatedAt
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Touch = %+v;\nwant %+v", got, want)
		}
		notBefore(t, "updated_at", got.UpdatedAt, before)
		if read, _ := st.Get(t.Context(), s.ID); !reflect.DeepEqual(read, got) {
			t.Errorf("Get after Touch = %+v;\nwant %+v", read, got)
		}
		if _, err := st.Touch(t.Context(), s.ID, 2, map[string]any{"heartbeat_at": "stale"}); !errors.Is(err, session.ErrConflict) {
			t.Errorf("touch of another generation: %v, want ErrConflict", err)
		}
		if read, _ := st.Get(t.Context(), s.ID); read.HeartbeatAt != beat {
			t.Errorf("a refused touch wrote heartbeat_at %q", read.HeartbeatAt)
		}
		ending := create(t, st, sample(t, session.Ending, 1))
		if _, err := st.Touch(t.Context(), ending.ID, 1, map[string]any{"heartbeat_at": beat}); err != nil {
			t.Errorf("touch of an ending session: %v", err)
		}
		failed := create(t, st, sample(t, session.Failed, 1))
		if _, err := st.Touch(t.Context(), failed.ID, 1, map[string]any{"heartbeat_at": beat}); !errors.Is(err, session.ErrConflict) {
			t.Errorf("touch of a failed session: %v, want ErrConflict", err)
		}
		if _, err := st.Touch(t.Context(), newID(t), 1, map[string]any{"heartbeat_at": beat}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("touch of an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("append events and read them in pages", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Ready, 1))
		before := time.Now()
		at := "2026-01-02T03:04:05.000000006Z"
		first, err := st.AppendEvents(t.Context(), s.ID, 1, []session.Event{
			{Type: "agent.message", Data: map[string]any{"text": "hi", "n": 1, "nested": map[string]any{"list": []any{1, "b"}}}},
			{Type: "agent.state", At: at},
			{Type: "agent.tool"},
		})
		if err != nil {
			t.Fatal(err)
		}
		second, err := st.AppendEvents(t.Context(), s.ID, 1, []session.Event{{Type: "a"}, {Type: "b"}})
		if err != nil {
			t.Fatal(err)
		}
		appended := append(first, second...)
		for i, e := range appended {
			if e.Seq != int64(i+1) || e.SessionID != s.ID {
				t.Errorf("appended event %d: seq %d, session %q; want %d, %q", i, e.Seq, e.SessionID, i+1, s.ID)
			}
			if e.At == "" || e.ExpiresAt < before.Add(session.Retention).Unix() {
				t.Errorf("appended event %d: at %q, expires_at %d; want a time, and to outlive its session's retention", i, e.At, e.ExpiresAt)
			}
		}
		if first[1].At != at {
			t.Errorf("an event's own time %q became %q", at, first[1].At)
		}
		all, err := st.Events(t.Context(), s.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(appended) {
			t.Fatalf("read %d events, appended %d", len(all), len(appended))
		}
		for i := range all {
			read, wrote := all[i], appended[i]
			read.Data, wrote.Data = nil, nil
			if !reflect.DeepEqual(read, wrote) {
				t.Errorf("event %d read as %+v, appended as %+v", i, read, wrote)
			}
		}
		// Data comes back as JSON would decode it.
		wantData := map[string]any{"text": "hi", "n": float64(1), "nested": map[string]any{"list": []any{float64(1), "b"}}}
		if !reflect.DeepEqual(all[0].Data, wantData) {
			t.Errorf("data %#v, want %#v", all[0].Data, wantData)
		}

		var paged []int64
		for after := int64(0); ; {
			page, err := st.Events(t.Context(), s.ID, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 2 {
				t.Fatalf("page of %d events, limit 2", len(page))
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				if e.Seq <= after {
					t.Fatalf("events after %d: %+v", after, page)
				}
				paged = append(paged, e.Seq)
			}
			after = page[len(page)-1].Seq
		}
		if !slices.Equal(paged, []int64{1, 2, 3, 4, 5}) {
			t.Errorf("paged by 2: %v", paged)
		}
		if page, err := st.Events(t.Context(), s.ID, 3, 100); err != nil || len(page) != 2 || page[0].Seq != 4 {
			t.Errorf("events after 3: %+v, %v", page, err)
		}
		if page, err := st.Events(t.Context(), newID(t), 0, 100); err != nil || len(page) != 0 {
			t.Errorf("events of an unknown id: %+v, %v; want none", page, err)
		}
	})

	t.Run("refused appends write nothing", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Working, 2))
		one := []session.Event{{Type: "x"}}
		if _, err := st.AppendEvents(t.Context(), s.ID, 1, one); !errors.Is(err, session.ErrConflict) {
			t.Errorf("append for another generation: %v, want ErrConflict", err)
		}
		if _, err := st.AppendEvents(t.Context(), s.ID, 2, nil); err == nil {
			t.Error("append of no events succeeded")
		}
		if _, err := st.AppendEvents(t.Context(), s.ID, 2, make([]session.Event, session.MaxEventsPerAppend+1)); err == nil {
			t.Errorf("append of %d events succeeded", session.MaxEventsPerAppend+1)
		}
		if evs, _ := st.Events(t.Context(), s.ID, 0, 100); len(evs) != 0 {
			t.Errorf("refused appends wrote %+v", evs)
		}
		// Refused appends take no sequence numbers.
		if out, err := st.AppendEvents(t.Context(), s.ID, 2, one); err != nil || out[0].Seq != 1 {
			t.Errorf("first append after refusals: %+v, %v; want seq 1", out, err)
		}
		ended := create(t, st, sample(t, session.Ended, 1))
		if _, err := st.AppendEvents(t.Context(), ended.ID, 1, one); !errors.Is(err, session.ErrConflict) {
			t.Errorf("append to an ended session: %v, want ErrConflict", err)
		}
		unknown := newID(t)
		if _, err := st.AppendEvents(t.Context(), unknown, 1, one); !errors.Is(err, session.ErrConflict) && !errors.Is(err, session.ErrNotFound) {
			t.Errorf("append to an unknown id: %v, want ErrConflict or ErrNotFound", err)
		}
		if evs, _ := st.Events(t.Context(), unknown, 0, 100); len(evs) != 0 {
			t.Errorf("append to an unknown id wrote %+v", evs)
		}
	})

	t.Run("concurrent appends get distinct consecutive numbers", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Working, 1))
		const callers, each = 10, 2 // each appends two events
		got := make([][]session.Event, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				out, err := st.AppendEvents(t.Context(), s.ID, 1, []session.Event{{Type: "a"}, {Type: "b"}})
				if err != nil {
					t.Errorf("append %d: %v", i, err)
				}
				got[i] = out
			})
		}
		wg.Wait()
		var seqs []int64
		for i, out := range got {
			if len(out) == each && out[1].Seq != out[0].Seq+1 {
				t.Errorf("append %d got seqs %d and %d, not consecutive", i, out[0].Seq, out[1].Seq)
			}
			for _, e := range out {
				seqs = append(seqs, e.Seq)
			}
		}
		slices.Sort(seqs)
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("seqs %v, want 1..%d each once", seqs, callers*each)
			}
		}
		if evs, err := st.Events(t.Context(), s.ID, 0, 100); err != nil || len(evs) != callers*each {
			t.Errorf("read %d events, %v; want %d", len(evs), err, callers*each)
		}
	})

	t.Run("append once", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, sample(t, session.Idle, 1))
		if _, err := st.AppendEvents(t.Context(), s.ID, 1, []session.Event{{Type: "before"}}); err != nil {
			t.Fatal(err)
		}
		rec := record(t, "message", s.ID)
		e, err := st.AppendOnce(t.Context(), s.ID, 1, session.Event{Type: "user.message", Data: map[string]any{"text": "hi"}}, rec)
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != 2 || e.SessionID != s.ID || e.Type != "user.message" {
			t.Errorf("AppendOnce = %+v, want seq 2 of %s", e, s.ID)
		}
		want := rec
		want.Seq = e.Seq
		if got, err := st.Idempotency(t.Context(), rec.Key); err != nil || got != want {
			t.Errorf("record %+v, %v; want %+v", got, err, want)
		}
		if _, err := st.AppendOnce(t.Context(), s.ID, 1, session.Event{Type: "user.message"}, rec); !errors.Is(err, session.ErrIdempotencyTaken) {
			t.Errorf("append with a used key: %v, want ErrIdempotencyTaken", err)
		}
		if evs, _ := st.Events(t.Context(), s.ID, 0, 100); len(evs) != 2 {
			t.Errorf("%d events after a refused append, want 2", len(evs))
		}
		if got, _ := st.Idempotency(t.Context(), rec.Key); got != want {
			t.Errorf("a refused append replaced the record: %+v", got)
		}
		// Numbers stay increasing after a refusal (there may be a gap).
		if out, err := st.AppendEvents(t.Context(), s.ID, 1, []session.Event{{Type: "after"}}); err != nil || out[0].Seq <= e.Seq {
			t.Errorf("append after a refused one: %+v, %v", out, err)
		}
		ended := create(t, st, sample(t, session.Ended, 1))
		fresh := record(t, "message", ended.ID)
		if _, err := st.AppendOnce(t.Context(), ended.ID, 1, session.Event{Type: "user.message"}, fresh); !errors.Is(err, session.ErrConflict) {
			t.Errorf("append once to an ended session: %v, want ErrConflict", err)
		}
		if _, err := st.Idempotency(t.Context(), fresh.Key); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("a refused append wrote its record: %v", err)
		}
	})
}

// sample returns a new session in state of generation gen, with every kind of
// field set.
func sample(t *testing.T, state session.State, gen int) session.Session {
	t.Helper()
	id := newID(t)
	now := stamp(time.Now())
	s := session.Session{
		ID: id, ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello",
		Features: session.Features{FileUpload: true, VoiceMic: true}, AppKeyID: "key-1",
		SessionType: "setup", ClientType: "automation", ConfigurationID: "cfg-1",
		State: state, Generation: gen, TokenHashes: []string{"hash-0"},
		TmuxSessionName: "ra-" + id[:8], CreatedAt: now, UpdatedAt: now,
	}
	if state.Terminal() {
		s.Reason, s.EndedAt = session.ReasonError, now
	}
	return s
}

func create(t *testing.T, st session.Store, s session.Session) session.Session {
	t.Helper()
	if err := st.Create(t.Context(), s, nil); err != nil {
		t.Fatalf("create %s: %v", s.ID, err)
	}
	return s
}

func record(t *testing.T, kind, sessionID string) session.IdempotencyRecord {
	t.Helper()
	now := time.Now().UTC()
	return session.IdempotencyRecord{
		Key: kind + "#" + newID(t), SessionID: sessionID, RequestHash: "request-hash",
		CreatedAt: stamp(now), ExpiresAt: now.Add(time.Hour).Unix(),
	}
}

// newID returns a random session id (a UUID v4).
func newID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// notBefore checks that the timestamp field was set, to a time not before t.
func notBefore(t *testing.T, field, value string, before time.Time) {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, value)
	if err != nil || at.Before(before.Truncate(time.Millisecond)) {
		t.Errorf("%s %q: want an RFC 3339 time not before %s", field, value, stamp(before))
	}
}
