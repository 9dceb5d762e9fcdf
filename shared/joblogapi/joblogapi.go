// Package joblogapi serves a job's log followed live to the orchestrator:
// GET /internal/jobs/{id}/logs/stream, Server-Sent Events of the events of
// the job's sandbox session (package eventsapi's stream), admitted as every
// /internal/ route is (package orchestratorapi).
package joblogapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/remote-agents/remote-agents/shared/eventsapi"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/orchestratorapi"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Jobs reads a job for whom the request names (job.Service).
type Jobs interface {
	Get(ctx context.Context, h job.Headers, id string) (job.Job, error)
}

// Handlers serve the job log stream.
type Handlers struct {
	// Admit checks the caller and reads the identity headers.
	Admit *orchestratorapi.Handlers
	Jobs  Jobs
	// Follow follows the events of a job's session.
	Follow eventsapi.Follower
	Log    *slog.Logger
}

// Routes is the job log stream's route: GET /internal/jobs/{id}/logs/stream.
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{{Method: http.MethodGet, Pattern: routes.PathJobLogStream, Stream: h.stream}}
}

// How the log stream waits for what its job has not done yet.
const (
	// sessionPoll is how often the stream of a queued job looks for the
	// session its sandbox runs in.
	sessionPoll = 500 * time.Millisecond
	// statusWait bounds the wait for a job's final status once its session
	// is over (the job service records it as the sandbox reports).
	statusWait = 10 * time.Second
)

// stream serves a job's log as Server-Sent Events: every event of the
// job's session, each with its sequence number as its SSE id and the same
// fields as a line of GET …/logs (seq, type, at, data), as they are appended
// and, once the job is over, as they were; then an `end` event with the
// job's status. The same stream during and after the run: a client that
// reconnects with Last-Event-ID (or ?last_event_id=) gets exactly the
// events after it. A stream ends before its function's timeout
// (RA_EVENTS_MAX_SECONDS); the client reconnects.
func (h *Handlers) stream(ctx context.Context, req httpapi.Request) (httpapi.Response, httpapi.BodyWriter) {
	hd, err := h.Admit.Admit(req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	after, ok := eventsapi.LastEventID(req)
	if !ok {
		return httpapi.Error(ctx, h.Log, eventsapi.InvalidLastEventID()), nil
	}
	id := req.PathParameters["id"]
	j, err := h.Jobs.Get(ctx, hd, id)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	res := eventsapi.StreamResponse()
	follow := h.Follow
	follow.Show = func(e session.Event) map[string]any { return e.Data } // the orchestrator's: as GET …/logs has it
	return res, func(w io.Writer, flush func()) error {
		// Until the job's sandbox session is there to follow (the job may
		// name it before its record is written).
		for !j.Status.Terminal() {
			if j.SessionID != "" {
				_, err := h.Follow.Store.Get(ctx, j.SessionID)
				if err == nil {
					break
				}
				if !errors.Is(err, session.ErrNotFound) {
					return err
				}
			}
			if _, err := io.WriteString(w, ": queued\n\n"); err != nil {
				return err
			}
			flush()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(sessionPoll):
			}
			if j, err = h.Jobs.Get(ctx, hd, id); err != nil {
				return err
			}
		}
		if j.SessionID != "" {
			over, err := follow.Follow(ctx, j.SessionID, after, w, flush)
			if err != nil || !over {
				return err
			}
		}
		j, err = h.final(ctx, hd, j)
		if err != nil {
			return err
		}
		return eventsapi.End(w, flush, map[string]any{"job_id": j.ID, "status": j.Status})
	}
}

// final reads job j until its status is final, for at most statusWait.
func (h *Handlers) final(ctx context.Context, hd job.Headers, j job.Job) (job.Job, error) {
	deadline := time.Now().Add(statusWait)
	for !j.Status.Terminal() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return j, nil
		case <-time.After(sessionPoll):
		}
		var err error
		if j, err = h.Jobs.Get(ctx, hd, j.ID); err != nil {
			return j, err
		}
	}
	return j, nil
}
