// Package viewerpush pushes an agent's events to the viewers watching it
// (the embed view) over the push channel's WebSocket, and serves the
// viewers' side of that channel.
//
// A viewer connects with ?agent=<id> (no token in the URL), then sends
// {"action":"sync","agent":…,"token":…,"after":N}: the session token
// admits it (within the agent's streams quota) and it is answered one
// sync frame with the events after N, as the event stream's cursor reads
// them (no gaps, no duplicates), and the text so far of the reply being
// written. From then on every append to the agent is pushed by whoever
// appends it (Hub.Appended, the session store's hook), and every live
// event by the sandbox's post of it (Hub.Deltas), as frames:
//
//	{"type":"sync","seq":X,"more":bool,"events":[…],"partial":{…}}
//	{"type":"events","events":[…]}   stored events, each {seq,type,at,data}
//	{"type":"live","events":[…]}     live events, each {type,at,data}
//	{"type":"end"}                   the agent is over; every event was sent
//	{"type":"error","error":{…}}     the error envelope (a refused sync)
//
// A viewer that sees a gap in the numbers, or that reconnects, syncs
// again after the last number it has.
package viewerpush

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/eventview"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Store is what the hub reads and keeps: sessions, their events, their
// viewers and the message being written.
type Store interface {
	session.Viewers
	Get(ctx context.Context, id string) (session.Session, error)
	Events(ctx context.Context, id string, after int64, limit int) ([]session.Event, error)
}

// Bounds of the viewers' channel.
const (
	// MaxFrame is what one frame may hold (API Gateway posts up to 128 KB).
	MaxFrame = 120 << 10
	// MaxMessage bounds what a viewer may send in one frame.
	MaxMessage = 4 << 10
	// ViewerTTL is how long a viewer is remembered at most: API Gateway
	// closes every connection within two hours.
	ViewerTTL = 3 * time.Hour
	// syncPages bounds the pages of events one sync reads.
	syncPages = 5
	page      = 100
)

// Frame types.
const (
	FrameSync   = "sync"
	FrameEvents = "events"
	FrameLive   = "live"
	FrameEnd    = "end"
	FrameError  = "error"
)

// Hub pushes to viewers and serves them.
type Hub struct {
	Notifier session.Notifier
	Store    Store
	// MaxViewers bounds an agent's viewers (the streams quota); 0: none.
	MaxViewers int
	Log        *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

func (h *Hub) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// syncFrame answers a sync.
type syncFrame struct {
	Type    string              `json:"type"`
	Seq     int64               `json:"seq"`
	More    bool                `json:"more"`
	Events  []eventview.Message `json:"events"`
	Partial *partial            `json:"partial,omitempty"`
}

type partial struct {
	MessageID string `json:"message_id"`
	Offset    int    `json:"offset"`
	Text      string `json:"text"`
}

type eventsFrame struct {
	Type   string              `json:"type"`
	Events []eventview.Message `json:"events"`
}

// LiveEvent is a live event as a viewer gets it.
type LiveEvent struct {
	Type string          `json:"type"`
	At   string          `json:"at"`
	Data json.RawMessage `json:"data"`
}

type liveFrame struct {
	Type   string      `json:"type"`
	Events []LiveEvent `json:"events"`
}

type errorFrame struct {
	Type  string           `json:"type"`
	Error httpapi.Envelope `json:"error"`
}

var endFrame = []byte(`{"type":"end"}`)

// message shows e as viewers see it (eventview.Public).
func message(e session.Event) eventview.Message {
	return eventview.Message{Seq: e.Seq, Type: e.Type, At: e.At.UTC().Format(time.RFC3339Nano), Data: eventview.Public(e)}
}

// Appended pushes events, just appended to session id, to its viewers:
// the session store's OnAppend. A terminal lifecycle event is followed by
// the end frame.
func (h *Hub) Appended(ctx context.Context, id string, viewers []string, events []session.Event) {
	frames, err := eventFrames(events)
	if err != nil {
		h.Log.ErrorContext(ctx, "encode events for viewers", slog.String("session_id", id), slog.String("error", err.Error()))
		return
	}
	for _, e := range events {
		if e.Type == sandboxwire.TypeAgentEnded || e.Type == sandboxwire.TypeAgentFailed {
			frames = append(frames, endFrame)
		}
	}
	h.post(ctx, id, viewers, frames)
}

// eventFrames packs events into as few events frames as MaxFrame allows.
func eventFrames(events []session.Event) ([][]byte, error) {
	var frames [][]byte
	var batch []eventview.Message
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		raw, err := json.Marshal(eventsFrame{Type: FrameEvents, Events: batch})
		if err != nil {
			return err
		}
		frames = append(frames, raw)
		batch, size = nil, 0
		return nil
	}
	for _, e := range events {
		m := message(e)
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encode event %d: %w", e.Seq, err)
		}
		if size+len(raw) > MaxFrame-64 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		batch = append(batch, m)
		size += len(raw) + 1
	}
	return frames, flush()
}

// post sends frames, in order, to each of viewers at once; a viewer found
// gone is taken out of the session's.
func (h *Hub) post(ctx context.Context, id string, viewers []string, frames [][]byte) {
	if h.Notifier == nil || len(frames) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, conn := range viewers {
		wg.Go(func() { h.postTo(ctx, id, conn, frames) })
	}
	wg.Wait()
}

func (h *Hub) postTo(ctx context.Context, id, conn string, frames [][]byte) {
	for _, f := range frames {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), session.PushTimeout)
		err := h.Notifier.Push(pctx, conn, f)
		cancel()
		if errors.Is(err, session.ErrGone) {
			if err := h.forget(ctx, id, conn); err != nil {
				h.Log.WarnContext(ctx, "forget a gone viewer", slog.String("session_id", id), slog.String("error", err.Error()))
			}
			return
		}
		if err != nil {
			h.Log.WarnContext(ctx, "push to a viewer", slog.String("session_id", id), slog.String("error", err.Error()))
			return
		}
	}
}

// forget takes viewer conn out of session id's; when it was the last, the
// sandbox is told that nobody watches (it stops posting live events).
func (h *Hub) forget(ctx context.Context, id, conn string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), session.PushTimeout)
	defer cancel()
	w, err := h.Store.RemoveViewer(ctx, id, conn)
	if err != nil || w.Viewers > 0 {
		return err
	}
	h.watch(ctx, id, w)
	return nil
}

// watch tells session id's sandbox, over its push connection if it held
// one as its viewers changed, how many viewers watch it
// (sandboxwire.PushWatch). A sandbox that connects later reads it in the
// answer of the inbox read it makes as it connects, and every heartbeat's
// answer says it too (Orders.Viewers).
func (h *Hub) watch(ctx context.Context, id string, w session.Watch) {
	if w.PushConnectionID == "" {
		return
	}
	raw, err := json.Marshal(sandboxwire.Push{Type: sandboxwire.PushWatch, Viewers: w.Viewers, ViewerEpoch: w.Epoch})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), session.PushTimeout)
	defer cancel()
	if err := h.Notifier.Push(ctx, w.PushConnectionID, raw); err != nil && !errors.Is(err, session.ErrGone) {
		h.Log.WarnContext(ctx, "tell the sandbox it is watched", slog.String("session_id", id), slog.String("error", err.Error()))
	}
}

// messageID is what a reply's id may look like.
var messageID = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Deltas takes a sandbox's live events (POST deltas): it pushes them to
// the session's viewers, then keeps the text so far of the reply they add
// to, for viewers that join in the middle of it.
func (h *Hub) Deltas(ctx context.Context, sess session.Session, req sandboxwire.DeltasRequest) error {
	if err := req.Validate(); err != nil {
		return apierror.New(apierror.InvalidRequest, "%s", err.Error())
	}
	at := h.now().UTC().Format(time.RFC3339Nano)
	live := make([]LiveEvent, 0, len(req.Deltas))
	var pieces []sandboxwire.MessageDelta
	for i, d := range req.Deltas {
		switch d.Type {
		case sandboxwire.TypeAgentMessageDelta:
			var m sandboxwire.MessageDelta
			if err := json.Unmarshal(d.Data, &m); err != nil || !messageID.MatchString(m.MessageID) || m.Offset < 0 {
				return apierror.New(apierror.InvalidRequest, "deltas[%d]: a message delta needs a message_id (1 to 64 of A-Z a-z 0-9 _ . : -), an offset of 0 or more and a text.", i)
			}
			if n := len(pieces); n > 0 && pieces[n-1].MessageID == m.MessageID {
				pieces[n-1].Text += m.Text
			} else {
				pieces = append(pieces, m)
			}
		case sandboxwire.TypeToolCallStarted:
			var t sandboxwire.ToolCallStarted
			if err := json.Unmarshal(d.Data, &t); err != nil || t.Tool == "" || len(t.Tool) > 128 || len(t.ToolCallID) > 256 {
				return apierror.New(apierror.InvalidRequest, "deltas[%d]: a tool call needs its tool (1 to 128 bytes) and a tool_call_id of at most 256.", i)
			}
		}
		live = append(live, LiveEvent{Type: d.Type, At: at, Data: d.Data})
	}
	if len(sess.Viewers) > 0 {
		raw, err := json.Marshal(liveFrame{Type: FrameLive, Events: live})
		if err != nil {
			return fmt.Errorf("encode live events: %w", err)
		}
		h.post(ctx, sess.ID, sess.Viewers, [][]byte{raw})
	}
	for _, p := range pieces {
		// A piece that does not follow what is kept (a post lost) stops
		// the keeping until the next reply: joiners get the rest as it
		// comes, and the whole reply once it is stored.
		if err := h.Store.AddPartial(ctx, sess.ID, p.MessageID, p.Offset, p.Text); err != nil && !errors.Is(err, session.ErrConflict) {
			return err
		}
	}
	return nil
}
