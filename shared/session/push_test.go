package session_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

// notifier records pushes and answers with err.
type notifier struct {
	mu     sync.Mutex
	pushed []string
	err    error
}

func (n *notifier) Push(_ context.Context, conn string, frame []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pushed = append(n.pushed, conn+" "+string(frame))
	return n.err
}

func (n *notifier) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pushed)
}

// Every item the platform adds to an inbox is pushed, and a stop; the
// sandbox's own events are not; a failed push fails nothing, and a gone
// connection is forgotten.
func TestInboxItemsArePushed(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		name    string
		err     error
		pushes  int
		forgets bool
	}{
		{"delivered", nil, 1, false},
		{"push fails", errors.New("throttled"), 1, false},
		{"connection gone", fmt.Errorf("post: %w", session.ErrGone), 2, true}, // tried again once: it may not be open yet
	} {
		t.Run(c.name, func(t *testing.T) {
			st := storetest.NewMemory()
			n := &notifier{err: c.err}
			svc := session.NewInbox(session.InboxOptions{Store: st, Notifier: n})
			sess := session.Session{ID: "5b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d6e", State: session.Idle, Generation: 1, TokenHashes: []string{"h"}, CreatedAt: time.Now()}
			if err := st.Create(ctx, sess, nil); err != nil {
				t.Fatal(err)
			}
			if err := st.SetPushConnection(ctx, sess.ID, 1, "conn=", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			sess, _ = st.Get(ctx, sess.ID)
			if _, err := svc.PostMessage(ctx, sess, session.MessageRequest{Text: "hi"}); err != nil {
				t.Fatalf("a push failure failed the message: %v", err)
			}
			if n.count() != c.pushes || n.pushed[0] != `conn= {"type":"inbox"}` {
				t.Errorf("pushed %v", n.pushed)
			}
			after, _ := st.Get(ctx, sess.ID)
			if forgot := after.PushConnectionID == ""; forgot != c.forgets {
				t.Errorf("connection after the push: %q", after.PushConnectionID)
			}
		})
	}

	t.Run("a sandbox's own events are not pushed, a stop is", func(t *testing.T) {
		st := storetest.NewMemory()
		n := &notifier{}
		ch := sandboxchannel.New(sandboxchannel.Options{Store: session.Pushing(st, n, nil)})
		sess := session.Session{ID: "6b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d6e", State: session.Idle, Generation: 1, CreatedAt: time.Now()}
		if err := st.Create(ctx, sess, nil); err != nil {
			t.Fatal(err)
		}
		if err := st.SetPushConnection(ctx, sess.ID, 1, "conn=", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		sess, _ = st.Get(ctx, sess.ID)
		if _, err := ch.Append(ctx, sess, sandboxwire.EventsRequest{Events: []sandboxwire.Event{{Type: sandboxwire.TypeAgentMessage, Data: []byte(`{"text":"hello"}`)}}}); err != nil {
			t.Fatal(err)
		}
		if n.count() != 0 {
			t.Errorf("the sandbox's own event was pushed: %v", n.pushed)
		}
		if _, err := session.Pushing(st, n, nil).Transition(ctx, sess.ID, session.Change{From: session.Running, To: session.Ending, Reason: session.ReasonShutdown}); err != nil {
			t.Fatal(err)
		}
		if n.count() != 1 {
			t.Errorf("the stop was not pushed: %v", n.pushed)
		}
	})
}
