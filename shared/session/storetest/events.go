package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// RunEventLog checks the session.EventLog contract: appending events,
// reading them in pages, and AppendOnce.
func RunEventLog(t *testing.T, newStore func(t *testing.T) EventStore) {
	t.Run("append events and read them in pages", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		s := create(t, st, unrecorded(sample(t, session.Ready, 1)))
		before := time.Now()
		at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
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
			if e.At.IsZero() || e.ExpiresAt < before.Add(session.Retention).Unix() {
				t.Errorf("appended event %d: at %s, expires_at %d; want a time, and to outlive its session's retention", i, e.At, e.ExpiresAt)
			}
		}
		if !first[1].At.Equal(at) {
			t.Errorf("an event's own time %s became %s", at, first[1].At)
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
		s := create(t, st, unrecorded(sample(t, session.Working, 2)))
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
		ended := create(t, st, unrecorded(sample(t, session.Ended, 1)))
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
		s := create(t, st, unrecorded(sample(t, session.Working, 1)))
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
		s := create(t, st, unrecorded(sample(t, session.Idle, 1)))
		if _, err := st.AppendEvents(t.Context(), s.ID, 1, []session.Event{{Type: "before"}}); err != nil {
			t.Fatal(err)
		}
		rec := record(t, "message", s.ID)
		out, err := st.AppendOnce(t.Context(), s.ID, 1, []session.Event{{Type: "user.message", Data: map[string]any{"text": "hi"}}, {Type: "second"}}, rec)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 2 || out[0].Seq != 2 || out[0].SessionID != s.ID || out[0].Type != "user.message" || out[1].Seq != 3 || out[1].Type != "second" {
			t.Fatalf("AppendOnce = %+v, want seq 2 and 3 of %s", out, s.ID)
		}
		e := out[1]
		want := rec
		want.Seq = e.Seq
		if got, err := st.Idempotency(t.Context(), rec.Key); err != nil || got != want {
			t.Errorf("record %+v, %v; want %+v", got, err, want)
		}
		if _, err := st.AppendOnce(t.Context(), s.ID, 1, []session.Event{{Type: "user.message"}}, rec); !errors.Is(err, session.ErrIdempotencyTaken) {
			t.Errorf("append with a used key: %v, want ErrIdempotencyTaken", err)
		}
		if evs, _ := st.Events(t.Context(), s.ID, 0, 100); len(evs) != 3 {
			t.Errorf("%d events after a refused append, want 3", len(evs))
		}
		if got, _ := st.Idempotency(t.Context(), rec.Key); got != want {
			t.Errorf("a refused append replaced the record: %+v", got)
		}
		// Numbers stay increasing after a refusal (there may be a gap).
		if out, err := st.AppendEvents(t.Context(), s.ID, 1, []session.Event{{Type: "after"}}); err != nil || out[0].Seq <= e.Seq {
			t.Errorf("append after a refused one: %+v, %v", out, err)
		}
		ended := create(t, st, unrecorded(sample(t, session.Ended, 1)))
		fresh := record(t, "message", ended.ID)
		if _, err := st.AppendOnce(t.Context(), ended.ID, 1, []session.Event{{Type: "user.message"}}, fresh); !errors.Is(err, session.ErrConflict) {
			t.Errorf("append once to an ended session: %v, want ErrConflict", err)
		}
		if _, err := st.Idempotency(t.Context(), fresh.Key); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("a refused append wrote its record: %v", err)
		}
	})
}

// streamLines are evs as "seq type data" lines, to compare a stream whole.
func streamLines(evs []session.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%d %s %v", e.Seq, e.Type, e.Data))
	}
	return out
}

// unrecorded is s as a job's sandbox, whose stream the platform records
// nothing in (session.Recorded): its appends number from 1.
func unrecorded(s session.Session) session.Session {
	s.JobID = "job-" + s.ID
	return s
}

// RunLifeEvents checks that the store records an app's agent's life in its
// stream, each event numbered in the write that changed the state: created
// (1), ready once, however often reported, and the end with its reason;
// and nothing of a job's sandbox.
func RunLifeEvents(t *testing.T, newStore func(t *testing.T) EventStore) {
	t.Parallel()
	st := newStore(t)
	s := create(t, st, sample(t, session.Provisioning, 1))
	change := func(from []session.State, to session.State, reason session.Reason) session.Session {
		t.Helper()
		after, err := st.Transition(t.Context(), s.ID, session.Change{From: from, To: to, Reason: reason})
		if err != nil {
			t.Fatalf("to %s: %v", to, err)
		}
		return after
	}
	change([]session.State{session.Provisioning}, session.Ready, "")
	change([]session.State{session.Ready}, session.Ready, "") // reported again
	if _, err := st.AppendEvents(t.Context(), s.ID, 1, []session.Event{{Type: "agent.message"}}); err != nil {
		t.Fatal(err)
	}
	change([]session.State{session.Ready}, session.Working, "")
	ended := change(session.Live, session.Ended, session.ReasonKilled)
	evs, err := st.Events(t.Context(), s.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := streamLines(evs)
	want := []string{
		"1 agent.created map[state:provisioning]",
		"2 agent.ready map[state:ready]",
		"3 agent.message map[]",
		"4 agent.ended map[reason:killed state:ended]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("stream %q, want %q", got, want)
	}
	if ended.LastSeq != 4 {
		t.Errorf("ended session's LastSeq %d, want 4", ended.LastSeq)
	}
	// A fork starts resuming from its source's checkpoint: its first ready
	// is recorded, a ready after a resume of its own is not.
	fork := create(t, st, sample(t, session.Resuming, 1))
	for _, c := range []session.Change{
		{From: []session.State{session.Resuming}, To: session.Ready, Set: session.Fields{ReadyAt: time.Unix(1, 0)}},
		{From: []session.State{session.Ready}, To: session.Pausing},
		{From: []session.State{session.Pausing}, To: session.Paused},
		{From: []session.State{session.Paused}, To: session.Resuming},
		{From: []session.State{session.Resuming}, To: session.Ready, Set: session.Fields{ReadyAt: time.Unix(2, 0)}},
	} {
		if _, err := st.Transition(t.Context(), fork.ID, c); err != nil {
			t.Fatalf("fork to %s: %v", c.To, err)
		}
	}
	evs, err = st.Events(t.Context(), fork.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	got = streamLines(evs)
	want = []string{
		"1 agent.created map[state:resuming]",
		"2 agent.ready map[state:ready]",
		"3 state.changed map[state:pausing]",
		"4 state.changed map[state:paused]",
		"5 state.changed map[state:resuming]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("a fork's stream %q, want %q", got, want)
	}
	job := create(t, st, unrecorded(sample(t, session.Provisioning, 1)))
	if _, err := st.Transition(t.Context(), job.ID, session.Change{From: session.Live, To: session.Failed}); err != nil {
		t.Fatal(err)
	}
	if evs, err := st.Events(t.Context(), job.ID, 0, 100); err != nil || len(evs) != 0 {
		t.Errorf("a job's sandbox's stream: %v, %v; want nothing", evs, err)
	}
}

// RunAppEvents checks AppendAppEvent: an app's own stream, numbered from 1
// apart from every agent's, each once key written once.
func RunAppEvents(t *testing.T, newStore func(t *testing.T) EventStore) {
	t.Parallel()
	st := newStore(t)
	tenant := "tenant-" + newID(t)
	for i, once := range []string{"a", "b", "a", ""} {
		e, ok, err := st.AppendAppEvent(t.Context(), tenant, once, session.Event{Type: "quota.exceeded", Data: map[string]any{"n": i}})
		switch {
		case err != nil:
			t.Fatal(err)
		case once == "a" && i == 2:
			if ok {
				t.Errorf("a used once key appended %+v", e)
			}
		case !ok || e.SessionID != session.AppStream(tenant) || e.At.IsZero():
			t.Errorf("append %d: %+v %v", i, e, ok)
		}
	}
	evs, err := st.Events(t.Context(), session.AppStream(tenant), 0, 10)
	if err != nil || len(evs) != 3 || evs[0].Seq != 1 || evs[2].Seq != 3 {
		t.Errorf("app stream %+v %v; want 3 events numbered 1..3", evs, err)
	}
	if evs, _ := st.Events(t.Context(), session.AppStream("other-"+tenant), 0, 10); len(evs) != 0 {
		t.Errorf("another app's stream holds %+v", evs)
	}
}

// RunEndRacesChanges: an end that races the agent's state changes (its
// read state moves before its write) is retried, and recorded once.
func RunEndRacesChanges(t *testing.T, newStore func(t *testing.T) EventStore) {
	t.Parallel()
	st := newStore(t)
	s := create(t, st, sample(t, session.Working, 1))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		states := []session.State{session.Working, session.Idle}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = st.Transition(t.Context(), s.ID, session.Change{From: []session.State{states[i%2]}, To: states[(i+1)%2]})
		}
	})
	var ended session.Session
	var err error
	for range 3 { // the flipping may win every try of one end; not of three
		if ended, err = st.Transition(t.Context(), s.ID, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonKilled}); err == nil {
			break
		}
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("end: %v", err)
	}
	evs, err := st.Events(t.Context(), s.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == "agent.ended" {
			n++
			if e.Seq != ended.LastSeq {
				t.Errorf("agent.ended is %d, the session's last number %d", e.Seq, ended.LastSeq)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d agent.ended in %+v, want 1", n, evs)
	}
}
