package dynamo_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	domain "github.com/remote-agents/remote-agents/shared/session"
)

// TestViewers: a session's viewers are a bounded set that every append
// reads back and hands OnAppend, with its events; a viewer's record names
// its session; the reply being written is kept piece by piece, in order.
func TestViewers(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	st := dynamo.NewSessions(api, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	var mu sync.Mutex
	var heard [][]string
	st.OnAppend = func(_ context.Context, id string, viewers []string, evs []domain.Event) {
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(viewers)
		heard = append(heard, append(viewers, evs[0].Type))
	}
	ctx := t.Context()
	id := "6b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d6f"
	now := time.Now().UTC()
	if err := st.Create(ctx, domain.Session{ID: id, Tenant: "t1", State: domain.Ready, Generation: 1, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendEvents(ctx, id, 1, []domain.Event{{Type: "state.changed"}}); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 0 {
		t.Fatalf("an append with no viewers was pushed: %v", heard)
	}
	for i, c := range []string{"conn-a", "conn-b", "conn-a"} {
		w, err := st.AddViewer(ctx, id, c, 2, now.Add(time.Hour))
		if err != nil || w != (domain.Watch{Viewers: min(i+1, 2), Epoch: int64(i + 1)}) {
			t.Fatalf("add %s: %+v %v", c, w, err)
		}
	}
	if _, err := st.AddViewer(ctx, id, "conn-c", 2, now.Add(time.Hour)); !errors.Is(err, domain.ErrOverQuota) {
		t.Errorf("a third viewer of two allowed: %v", err)
	}
	if _, err := st.AddViewer(ctx, "7b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d6f", "conn-d", 2, now.Add(time.Hour)); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("a viewer of no session: %v", err)
	}
	if got, err := st.ViewerSession(ctx, "conn-b"); err != nil || got != id {
		t.Errorf("conn-b watches %q, %v", got, err)
	}
	if _, err := st.ViewerSession(ctx, "conn-x"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("no viewer's record: %v", err)
	}
	if _, err := st.AppendEvents(ctx, id, 1, []domain.Event{{Type: "agent.message"}}); err != nil {
		t.Fatal(err)
	}
	if w, err := st.RemoveViewer(ctx, id, "conn-a"); err != nil || w != (domain.Watch{Viewers: 1, Epoch: 4}) {
		t.Fatalf("remove: %+v, %v", w, err)
	}
	if sess, err := st.Get(ctx, id); err != nil || !slices.Equal(sess.Viewers, []string{"conn-b"}) || sess.ViewerEpoch != 4 {
		t.Errorf("viewers after a removal: %v (epoch %d) %v", sess.Viewers, sess.ViewerEpoch, err)
	}
	if _, err := st.Transition(ctx, id, domain.Change{From: domain.Live, To: domain.Ended, Reason: domain.ReasonShutdown}); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"conn-a", "conn-b", "agent.message"}, {"conn-b", "agent.ended"}}
	if !slices.EqualFunc(heard, want, slices.Equal) {
		t.Errorf("OnAppend heard %v, want %v", heard, want)
	}

	// The reply being written.
	if p, err := st.Partial(ctx, id); err != nil || p != (domain.Partial{}) {
		t.Errorf("no reply yet: %+v %v", p, err)
	}
	for _, step := range []struct {
		msg    string
		offset int
		text   string
		err    error
	}{
		{"m1", 0, "Hé", nil},
		{"m1", 2, "llo ", nil},
		{"m1", 2, "again", domain.ErrConflict}, // out of order: not kept
		{"m0", 6, "late", domain.ErrConflict},  // another reply's
		{"m1", 6, "world", nil},
	} {
		if err := st.AddPartial(ctx, id, step.msg, step.offset, step.text); !errors.Is(err, step.err) {
			t.Errorf("add %+v: %v", step, err)
		}
	}
	if p, err := st.Partial(ctx, id); err != nil || p != (domain.Partial{MessageID: "m1", Text: "Héllo world"}) {
		t.Errorf("partial %+v %v", p, err)
	}
	if err := st.AddPartial(ctx, id, "m2", 0, "Next"); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.Partial(ctx, id); p != (domain.Partial{MessageID: "m2", Text: "Next"}) {
		t.Errorf("a new reply: %+v", p)
	}
}
