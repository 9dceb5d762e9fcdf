package session

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Notifier pushes frames to sandboxes over their push connections (on AWS the
// WebSocket API's @connections, package apigwpush).
type Notifier interface {
	// Push sends frame to the connection connectionID. It returns ErrGone
	// when that connection is no more (closed, or never was).
	Push(ctx context.Context, connectionID string, frame []byte) error
}

// ErrGone is a Notifier's error for a connection that is no more.
var ErrGone = errors.New("push connection gone")

// Push timing.
const (
	// PushTimeout bounds one push: what is pushed is in the inbox already, so
	// a slow push only delays the sandbox until its next poll.
	PushTimeout = 2 * time.Second
	// PushConnectionTTL is how long a push connection is remembered at most:
	// API Gateway closes every WebSocket connection within two hours.
	PushConnectionTTL = 3 * time.Hour
	// goneRecheck is how long a push found gone waits before its second try.
	goneRecheck = 250 * time.Millisecond
)

// Pushing returns st waking a session's sandbox over n whenever the platform
// adds to its inbox or stops it (see pushing); st itself when n is nil or st
// pushes already.
func Pushing(st Store, n Notifier, log *slog.Logger) Store {
	if n == nil || st == nil {
		return st
	}
	if _, done := st.(pushing); done {
		return st
	}
	if log == nil {
		log = slog.Default()
	}
	return pushing{Store: st, n: n, log: log}
}

// pushing is a Store that wakes a session's sandbox whenever the platform adds
// to its inbox or stops it: every event appended that a sandbox does not send
// itself (user messages, env values, answers, and whatever the platform adds
// to inboxes later), and every move to ending or over. The push never fails
// the write it follows: the inbox holds what it announces.
type pushing struct {
	Store
	n   Notifier
	log *slog.Logger
}

// AppendEvents appends, then wakes the sandbox if an event is for it.
func (p pushing) AppendEvents(ctx context.Context, id string, generation int, events []Event) ([]Event, error) {
	out, err := p.Store.AppendEvents(ctx, id, generation, events)
	if err == nil && forSandbox(events...) {
		p.wake(ctx, id)
	}
	return out, err
}

// AppendOnce appends once, then wakes the sandbox if an event is for it.
func (p pushing) AppendOnce(ctx context.Context, id string, generation int, events []Event, rec IdempotencyRecord) ([]Event, error) {
	out, err := p.Store.AppendOnce(ctx, id, generation, events, rec)
	if err == nil && forSandbox(events...) {
		p.wake(ctx, id)
	}
	return out, err
}

// Transition applies c, then wakes the sandbox of a session told to stop,
// or to write the checkpoint of a pause.
func (p pushing) Transition(ctx context.Context, id string, c Change) (Session, error) {
	after, err := p.Store.Transition(ctx, id, c)
	if err == nil && (after.State == Ending || after.State == Pausing || after.State.Terminal()) {
		p.push(ctx, after)
	}
	return after, err
}

// forSandbox reports whether one of events is the platform's, for the
// sandbox's inbox: one a sandbox does not send itself.
func forSandbox(events ...Event) bool {
	for _, e := range events {
		if !sandboxwire.SandboxMaySend(e.Type) {
			return true
		}
	}
	return false
}

// wake pushes to the sandbox of session id, if it holds a connection.
func (p pushing) wake(ctx context.Context, id string) {
	sess, err := p.Get(ctx, id)
	if err != nil {
		p.log.WarnContext(ctx, "push: read session", slog.String("session_id", id), slog.String("error", err.Error()))
		return
	}
	p.push(ctx, sess)
}

// inboxFrame is what a wake pushes.
var inboxFrame, _ = json.Marshal(sandboxwire.Push{Type: sandboxwire.PushInbox})

// push sends sess's sandbox an inbox frame; a connection that is gone is
// forgotten, any other failure logged.
func (p pushing) push(ctx context.Context, sess Session) {
	conn := sess.PushConnectionID
	if conn == "" {
		return // no connection: the sandbox polls
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PushTimeout)
	defer cancel()
	err := p.n.Push(ctx, conn, inboxFrame)
	if errors.Is(err, ErrGone) {
		// A connection whose $connect has been recorded but not yet
		// answered may not be open yet: try once more before forgetting it.
		select {
		case <-ctx.Done():
		case <-time.After(goneRecheck):
			err = p.n.Push(ctx, conn, inboxFrame)
		}
	}
	switch {
	case errors.Is(err, ErrGone):
		if err := p.ClearPushConnection(ctx, conn); err != nil {
			p.log.WarnContext(ctx, "push: forget a gone connection", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
		}
	case err != nil:
		p.log.WarnContext(ctx, "push failed; the sandbox's poll reads the inbox", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	}
}
