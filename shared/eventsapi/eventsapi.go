// Package eventsapi serves an agent's events to apps and the embed view as
// Server-Sent Events: GET /api/remote_agents/{id}/events, with the session token
// as a bearer header, in TokenHeader, or as ?token=.
//
// Every event carries its sequence number as its SSE id. A client that reconnects
// with Last-Event-ID (header, or ?last_event_id=) gets exactly the events after
// it, in order: the stream reads the events table by cursor and never advances
// past a sequence number that is not written yet (see session.Contiguous), so
// there are no gaps and no duplicates. Comments keep idle connections open. What
// is shown is sanitised (FR2) and internal fields are dropped.
//
// When the events cannot be read (the store is unavailable) a few times in a
// row, the stream does not idle on: it sends an `unavailable` event with the
// error envelope, a `retry:` hint of when to reconnect, and ends.
package eventsapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/eventview"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Defaults of Handlers.
const (
	// ActivePoll is how often a stream reads new events while the agent is busy;
	// IdlePoll once nothing happened for IdleAfter.
	ActivePoll = 100 * time.Millisecond
	IdlePoll   = time.Second
	IdleAfter  = 30 * time.Second
	// KeepAlive is how often an idle stream sends a comment.
	KeepAlive = 15 * time.Second
	// page bounds one read of the events table.
	page = 100
	// overCheck is how often an idle stream checks whether the session ended.
	overCheck = 2 * time.Second
	// MaxReadFailures is how many reads of the events may fail in a row before
	// the stream ends with a retry hint.
	MaxReadFailures = 3
)

// Store is what a stream reads of its session: the session, to see it end
// (session.Reader), and its events (session.EventLog's Events).
type Store interface {
	// Get reads a session; session.ErrNotFound if absent.
	Get(ctx context.Context, id string) (session.Session, error)
	// Events returns up to limit events after sequence number after, in order.
	Events(ctx context.Context, id string, after int64, limit int) ([]session.Event, error)
}

// Streams authorizes a stream's token and admits the stream within its
// session's quota (session.Streams).
type Streams interface {
	Authorize(ctx context.Context, id, tok string) (session.Session, error)
	OpenStream(ctx context.Context, sess session.Session) (close func(), err error)
}

// Handlers serve the events route.
type Handlers struct {
	Sessions Streams
	Follower
}

// Follower writes a session's events as Server-Sent Events while they are
// appended (Follow).
type Follower struct {
	Store Store
	Log   *slog.Logger
	// MaxDuration ends a stream (the client reconnects with Last-Event-ID): a
	// Lambda function must end before its timeout. Zero: until the client goes.
	MaxDuration time.Duration
	// ActivePoll, IdlePoll and KeepAlive override the defaults (tests).
	ActivePoll, IdlePoll, KeepAlive time.Duration
	// Show is what the reader sees of an event's data; nil:
	// eventview.Public, what the agent's viewers may see.
	Show func(session.Event) map[string]any
}

// Routes is the events route, with CORS for allowedOrigins.
func (h *Handlers) Routes(allowedOrigins []string) []httpapi.Route {
	return []httpapi.Route{{Method: http.MethodGet, Pattern: routes.PathEvents, Stream: httpapi.CORSStream(allowedOrigins, "GET", h.Events), CORS: true}}
}

// TokenHeader carries the session token where Authorization cannot: on AWS the
// route's function is reached through CloudFront's origin access control,
// which signs each request and so overwrites the caller's Authorization.
const TokenHeader = "X-Session-Token"

// Events serves GET /api/remote_agents/{id}/events.
func (h *Handlers) Events(ctx context.Context, req httpapi.Request) (httpapi.Response, httpapi.BodyWriter) {
	tok := httpapi.BearerToken(req)
	if tok == "" {
		tok = strings.TrimSpace(httpapi.Header(req, TokenHeader))
	}
	if tok == "" {
		tok = req.QueryStringParameters["token"]
	}
	id := req.PathParameters["id"]
	sess, err := h.Sessions.Authorize(ctx, id, tok)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	after, ok := LastEventID(req)
	if !ok {
		return httpapi.Error(ctx, h.Log, InvalidLastEventID()), nil
	}
	// Each agent has a quota of open streams.
	closed, err := h.Sessions.OpenStream(ctx, sess)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	res := StreamResponse()
	return res, func(w io.Writer, flush func()) error {
		defer closed()
		over, err := h.Follow(ctx, sess.ID, after, w, flush)
		if err != nil || !over {
			return err
		}
		return End(w, flush, struct{}{})
	}
}

// StreamResponse is the head of a Server-Sent Events answer: 200, never
// cached or sniffed, never buffered by a proxy.
func StreamResponse() httpapi.Response {
	return httpapi.Response{StatusCode: http.StatusOK, Headers: map[string]string{
		"Content-Type":           "text/event-stream; charset=utf-8",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
		"X-Accel-Buffering":      "no",
	}}
}

// End writes the last event of a stream whose session is over: `end`, with
// data.
func End(w io.Writer, flush func(), data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode end: %w", err)
	}
	if _, err := fmt.Fprintf(w, "event: end\ndata: %s\n\n", raw); err != nil {
		return err
	}
	flush()
	return nil
}

// LastEventID reads the cursor a stream resumes after: the Last-Event-ID
// header, or ?last_event_id=; 0 for none, false for one that is not a
// sequence number.
func LastEventID(req httpapi.Request) (int64, bool) {
	v := httpapi.Header(req, "Last-Event-ID")
	if v == "" {
		v = req.QueryStringParameters["last_event_id"]
	}
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 0
}

// Follow writes session id's events after sequence number after, each
// with its sequence number as its SSE id, until ctx ends, MaxDuration
// passes, or the session is over and all its events are out: then over is
// true, and the caller writes how it ended (End). When the events cannot be
// read a few times in a row, it ends with an `unavailable` event and a retry
// hint.
func (h Follower) Follow(ctx context.Context, id string, after int64, w io.Writer, flush func()) (over bool, err error) {
	active, idle, keep := cmp.Or(h.ActivePoll, ActivePoll), cmp.Or(h.IdlePoll, IdlePoll), cmp.Or(h.KeepAlive, KeepAlive)
	show := h.Show
	if show == nil {
		show = eventview.Public
	}
	if _, err := io.WriteString(w, "retry: 1000\n\n"); err != nil {
		return false, err
	}
	flush()
	began := time.Now()
	lastEvent, lastWrite, lastCheck := began, began, time.Time{}
	failures := 0
	for {
		evs, err := h.Store.Events(ctx, id, after, page)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			h.Log.WarnContext(ctx, "read events", slog.String("session_id", id), slog.String("error", err.Error()))
			if failures++; failures >= MaxReadFailures {
				return false, unavailable(w, flush, err)
			}
		} else {
			failures = 0
		}
		ready := session.Contiguous(evs, after, time.Now())
		for _, e := range ready {
			if err := write(w, e, show); err != nil {
				return false, err
			}
			after = e.Seq
		}
		now := time.Now()
		if len(ready) > 0 {
			flush()
			lastEvent, lastWrite = now, now
			if len(ready) == page {
				continue // more are waiting
			}
		}
		if len(evs) == 0 && now.Sub(lastCheck) >= overCheck {
			lastCheck = now
			if h.over(ctx, id, after) {
				return true, nil
			}
		}
		if h.MaxDuration > 0 && now.Sub(began) > h.MaxDuration {
			return false, nil
		}
		if now.Sub(lastWrite) >= keep {
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return false, err
			}
			flush()
			lastWrite = now
		}
		wait := active
		if now.Sub(lastEvent) > IdleAfter {
			wait = idle
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(wait):
		}
	}
}

// unavailable ends a stream whose events cannot be read: the error envelope as
// an `unavailable` event, and a retry hint of when to reconnect (with
// Last-Event-ID, so nothing is lost).
func unavailable(w io.Writer, flush func(), cause error) error {
	env := httpapi.EnvelopeOf(apierror.Unavailable(cause))
	raw, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("encode unavailable: %w", err)
	}
	if _, err := fmt.Fprintf(w, "retry: %d\nevent: unavailable\ndata: %s\n\n", env.RetryAfterSeconds*1000, raw); err != nil {
		return err
	}
	flush()
	return nil
}

// over reports whether a reader at after has every event of the session:
// it ended (so its counter stopped) and after is its last number, or the
// number left unwritten (a failed append's) for session.GapGrace; or it is
// gone (its record expired).
func (h Follower) over(ctx context.Context, id string, after int64) bool {
	sess, err := h.Store.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		return true
	}
	return err == nil && sess.State.Terminal() && (after >= sess.LastSeq || time.Since(sess.EndedAt) > session.GapGrace)
}

func write(w io.Writer, e session.Event, show func(session.Event) map[string]any) error {
	raw, err := json.Marshal(eventview.Message{Seq: e.Seq, Type: e.Type, At: e.At.UTC().Format(time.RFC3339Nano), Data: show(e)})
	if err != nil {
		return fmt.Errorf("encode event %d: %w", e.Seq, err)
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, raw)
	return err
}

// InvalidLastEventID is the error of a cursor LastEventID cannot read.
func InvalidLastEventID() error {
	return apierror.New(apierror.InvalidRequest, "Last-Event-ID must be an event id (a non-negative integer).")
}
