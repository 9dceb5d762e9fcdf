package viewerpush_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/viewerpush"
)

// store is a session with its events, viewers and reply being written.
type store struct {
	mu      sync.Mutex
	sess    session.Session
	events  []session.Event
	partial session.Partial
	removed []string
}

func (s *store) Get(context.Context, string) (session.Session, error) { return s.sess, nil }
func (s *store) Events(_ context.Context, _ string, after int64, limit int) ([]session.Event, error) {
	var out []session.Event
	for _, e := range s.events {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}
func (s *store) AddViewer(_ context.Context, _, conn string, _ int, _ time.Time) (session.Watch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess.Viewers = append(s.sess.Viewers, conn)
	return session.Watch{Viewers: len(s.sess.Viewers)}, nil
}
func (s *store) ViewerSession(context.Context, string) (string, error) { return s.sess.ID, nil }
func (s *store) RemoveViewer(_ context.Context, _, conn string) (session.Watch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = append(s.removed, conn)
	return session.Watch{Viewers: 1}, nil
}
func (s *store) AddPartial(_ context.Context, _, id string, offset int, text string) error {
	s.partial = session.Partial{MessageID: id, Text: s.partial.Text[:min(offset, len(s.partial.Text))] + text}
	return nil
}
func (s *store) Partial(context.Context, string) (session.Partial, error) { return s.partial, nil }

// notifier records what is posted to each connection; gone ones answer
// session.ErrGone.
type notifier struct {
	mu     sync.Mutex
	frames map[string][]map[string]any
	gone   map[string]bool
}

func (n *notifier) Push(_ context.Context, conn string, frame []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gone[conn] {
		return session.ErrGone
	}
	var f map[string]any
	if err := json.Unmarshal(frame, &f); err != nil {
		return err
	}
	if len(frame) > viewerpush.MaxFrame {
		f["oversize"] = true
	}
	n.frames[conn] = append(n.frames[conn], f)
	return nil
}

func rig(t *testing.T, events int, state session.State) (*viewerpush.Hub, *store, *notifier, string) {
	t.Helper()
	tok, hash := token.New(token.Session)
	now := time.Now()
	st := &store{sess: session.Session{ID: "5b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d6f", State: state, TokenHashes: []string{hash}, LastSeq: int64(events), EndedAt: now}}
	for i := range events {
		st.events = append(st.events, session.Event{Seq: int64(i + 1), Type: sandboxwire.TypeAgentMessage, At: now, Data: map[string]any{"text": strings.Repeat("x", 2000), "message_id": "m" + string(rune('a'+i%26))}})
	}
	n := &notifier{frames: map[string][]map[string]any{}, gone: map[string]bool{}}
	return &viewerpush.Hub{Notifier: n, Store: st, Log: slog.New(slog.DiscardHandler)}, st, n, tok
}

func syncBody(id, tok string, after int64) string {
	raw, _ := json.Marshal(viewerpush.Sync{Action: "sync", Agent: id, Token: tok, After: after})
	return string(raw)
}

func TestSyncPagesThroughWhatWasMissed(t *testing.T) {
	t.Parallel()
	h, st, n, tok := rig(t, 120, session.Working)
	st.partial = session.Partial{MessageID: "live", Text: "so far"}
	var seen int64
	for range 10 {
		h.Message(t.Context(), "c1", syncBody(st.sess.ID, tok, seen))
		f := n.frames["c1"][len(n.frames["c1"])-1]
		if f["type"] != "sync" {
			t.Fatalf("frame %v", f)
		}
		for _, e := range f["events"].([]any) {
			if seq := int64(e.(map[string]any)["seq"].(float64)); seq != seen+1 {
				t.Fatalf("event %d after %d", seq, seen)
			}
			seen++
		}
		if int64(f["seq"].(float64)) != seen {
			t.Fatalf("cursor %v, want %d", f["seq"], seen)
		}
		if f["more"] == true {
			if f["partial"] != nil {
				t.Errorf("a partial with more to come: %v", f["partial"])
			}
			continue
		}
		if p, _ := f["partial"].(map[string]any); p["text"] != "so far" || p["message_id"] != "live" {
			t.Errorf("the last sync's partial: %v", f["partial"])
		}
		break
	}
	if seen != 120 || len(n.frames["c1"]) < 3 {
		t.Errorf("%d events in %d frames, want 120 in frames under 120 KB each", seen, len(n.frames["c1"]))
	}
	for _, f := range n.frames["c1"] {
		if f["oversize"] == true {
			t.Errorf("a frame over %d bytes", viewerpush.MaxFrame)
		}
	}
}

func TestSyncOfAStoredReplyHasNoPartialAndAnEndedAgentEnds(t *testing.T) {
	t.Parallel()
	h, st, n, tok := rig(t, 3, session.Working)
	st.partial = session.Partial{MessageID: "mb", Text: "half"} // event 2's
	h.Message(t.Context(), "c1", syncBody(st.sess.ID, tok, 0))
	if f := n.frames["c1"][0]; f["partial"] != nil {
		t.Errorf("the partial of a stored reply: %v", f)
	}
	st.sess.State = session.Ended
	h.Message(t.Context(), "c2", syncBody(st.sess.ID, tok, 0))
	if got := n.frames["c2"]; len(got) != 2 || got[1]["type"] != "end" {
		t.Errorf("an ended agent's sync: %v", got)
	}
	h.Message(t.Context(), "c3", syncBody(st.sess.ID, "ras_wrong", 0))
	if got := n.frames["c3"]; len(got) != 1 || got[0]["type"] != "error" || got[0]["error"].(map[string]any)["status"] != 401.0 {
		t.Errorf("a wrong token: %v", got)
	}
	h.Message(t.Context(), "c4", `{"action":"nope"}`)
	if got := n.frames["c4"]; len(got) != 1 || got[0]["error"].(map[string]any)["status"] != 400.0 {
		t.Errorf("not a sync: %v", got)
	}
}

func TestAppendedGoesToEveryViewerAndForgetsTheGone(t *testing.T) {
	t.Parallel()
	h, st, n, _ := rig(t, 0, session.Working)
	n.gone["c2"] = true
	h.Appended(t.Context(), st.sess.ID, []string{"c1", "c2", "c3"}, []session.Event{
		{Seq: 7, Type: sandboxwire.TypeToolCall, At: time.Now(), Data: map[string]any{"tool": "bash", "is_error": true, "output": "/secret/path failed"}},
		{Seq: 8, Type: sandboxwire.TypeAgentEnded, At: time.Now(), Data: map[string]any{"state": "ended"}},
	})
	for _, c := range []string{"c1", "c3"} {
		got := n.frames[c]
		if len(got) != 2 || got[0]["type"] != "events" || got[1]["type"] != "end" {
			t.Fatalf("%s got %v", c, got)
		}
		// What the event stream shows (eventview.Public): errors sanitised.
		if out := got[0]["events"].([]any)[0].(map[string]any)["data"].(map[string]any)["output"].(string); !strings.HasPrefix(out, "The operation encountered an error.") {
			t.Errorf("a viewer saw an unsanitised error: %q", out)
		}
	}
	if len(st.removed) != 1 || st.removed[0] != "c2" {
		t.Errorf("removed %v, want the gone c2", st.removed)
	}
}
