package viewerpush

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/eventview"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// AgentParam is the query parameter a viewer's connect names its agent by.
const AgentParam = "agent"

// IsViewer reports whether a $connect is a viewer's (it names an agent).
func IsViewer(req httpapi.SocketRequest) bool {
	_, ok := req.QueryStringParameters[AgentParam]
	return ok
}

// Connect takes a viewer's $connect: the agent it names must look like an
// agent's id; the sync that follows proves the viewer may watch it.
func (h *Hub) Connect(req httpapi.SocketRequest) error {
	if !session.ValidID(req.QueryStringParameters[AgentParam]) {
		return apierror.New(apierror.AgentNotFound, "No agent has that id.")
	}
	return nil
}

// Sync is what a viewer sends: the agent it watches, its session token,
// and the number of the last event it has.
type Sync struct {
	Action string `json:"action"`
	Agent  string `json:"agent"`
	Token  string `json:"token"`
	After  int64  `json:"after"`
}

// Message serves a frame a viewer sent on connection conn ($default): a
// sync. Whatever goes wrong is answered to the viewer as an error frame.
func (h *Hub) Message(ctx context.Context, conn, body string) {
	err := h.sync(ctx, conn, body)
	if err == nil {
		return
	}
	if httpapi.Internal(err) {
		h.Log.ErrorContext(ctx, "viewer sync", slog.String("error", err.Error()))
	}
	raw, jerr := json.Marshal(errorFrame{Type: FrameError, Error: httpapi.EnvelopeOf(err)})
	if jerr != nil {
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), session.PushTimeout)
	defer cancel()
	_ = h.Notifier.Push(pctx, conn, raw)
}

func (h *Hub) sync(ctx context.Context, conn, body string) error {
	if h.Notifier == nil {
		return apierror.New(apierror.ServiceUnavailable, "Live viewing is not configured.")
	}
	var s Sync
	if len(body) > MaxMessage || json.Unmarshal([]byte(body), &s) != nil || s.Action != "sync" || s.After < 0 {
		return apierror.New(apierror.InvalidRequest, `A viewer sends {"action":"sync","agent":"<id>","token":"<session token>","after":<last event number>}.`)
	}
	sess, err := session.Authorize(ctx, h.Store, s.Agent, s.Token, h.now())
	if err != nil {
		return err
	}
	if !sess.State.Terminal() {
		w, err := h.Store.AddViewer(ctx, sess.ID, conn, h.maxViewers(), h.now().Add(ViewerTTL))
		if errors.Is(err, session.ErrOverQuota) {
			return &apierror.Error{Code: apierror.QuotaExceeded, RetryAfter: session.StreamQuotaRetry, Details: map[string]any{"quota": "streams_per_session", "limit": h.MaxViewers},
				Message: fmt.Sprintf("This agent has %d viewers, its quota; close one or watch its event stream.", h.MaxViewers)}
		}
		if err != nil {
			return err
		}
		// Its sandbox posts live events from now on (the reply being
		// written from its start).
		h.watch(ctx, sess.ID, w)
	}
	// The message being written is read before the events: if its whole
	// message is stored meanwhile, the events hold it.
	var part session.Partial
	if sess.State == session.Working {
		if part, err = h.Store.Partial(ctx, sess.ID); err != nil {
			return err
		}
	}
	frame := syncFrame{Type: FrameSync, Seq: s.After, Events: []eventview.Message{}}
	size := 0
	for range syncPages {
		evs, err := h.Store.Events(ctx, sess.ID, frame.Seq, page)
		if err != nil {
			return err
		}
		ready := session.Contiguous(evs, frame.Seq, h.now())
		for _, e := range ready {
			m := message(e)
			raw, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("encode event %d: %w", e.Seq, err)
			}
			if size+len(raw) > MaxFrame-1024 {
				frame.More = true
				break
			}
			size += len(raw) + 1
			frame.Events = append(frame.Events, m)
			frame.Seq = e.Seq
			if e.Type == sandboxwire.TypeAgentMessage && e.Data["message_id"] == part.MessageID {
				part = session.Partial{}
			}
		}
		if frame.More || len(ready) < page {
			break
		}
	}
	if len(frame.Events) == syncPages*page {
		frame.More = true
	}
	if part.MessageID != "" && !frame.More && len(part.Text) < MaxFrame-size-1024 {
		frame.Partial = &partial{MessageID: part.MessageID, Text: part.Text}
	}
	raw, err := json.Marshal(frame)
	if err != nil {
		return fmt.Errorf("encode sync: %w", err)
	}
	frames := [][]byte{raw}
	if !frame.More && over(sess, frame.Seq, h.now()) {
		frames = append(frames, endFrame)
	}
	h.postTo(ctx, sess.ID, conn, frames)
	return nil
}

// over reports whether a reader at after has every event of sess (as the
// event stream decides: eventview.Follower).
func over(sess session.Session, after int64, now time.Time) bool {
	return sess.State.Terminal() && (after >= sess.LastSeq || now.Sub(sess.EndedAt) > session.GapGrace)
}

// Disconnect forgets viewer conn ($disconnect); false if conn is no
// viewer's.
func (h *Hub) Disconnect(ctx context.Context, conn string) (bool, error) {
	id, err := h.Store.ViewerSession(ctx, conn)
	if errors.Is(err, session.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, h.forget(ctx, id, conn)
}

func (h *Hub) maxViewers() int {
	if h.MaxViewers <= 0 {
		return 1 << 20
	}
	return h.MaxViewers
}
