package systemtest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// viewer is a viewer on the push channel, as the embed view connects.
type viewer struct {
	t    testing.TB
	c    *websocket.Conn
	id   string
	tok  string
	seen []map[string]any // every frame read
	// pending are frames read while waiting for another type, in order,
	// for a later next: frames may come in any order (a push may pass a
	// sync's answer).
	pending []map[string]any
}

// watch connects a viewer to agent id and syncs it from after.
func (s *stack) watch(t testing.TB, id, tok string, after int64) *viewer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.srv.URL, "http")+"/@push?agent="+id, nil)
	if err != nil {
		t.Fatalf("connect a viewer: %v (%v)", err, res)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	v := &viewer{t: t, c: c, id: id, tok: tok}
	v.sync(after)
	return v
}

func (v *viewer) sync(after int64) {
	v.t.Helper()
	raw, _ := json.Marshal(map[string]any{"action": "sync", "agent": v.id, "token": v.tok, "after": after})
	if err := v.c.Write(v.t.Context(), websocket.MessageText, raw); err != nil {
		v.t.Fatalf("sync: %v", err)
	}
}

// next returns the first frame of type typ not returned yet, reading frames
// until one comes.
func (v *viewer) next(typ string) map[string]any {
	v.t.Helper()
	for i, f := range v.pending {
		if f["type"] == typ {
			v.pending = append(v.pending[:i:i], v.pending[i+1:]...)
			return f
		}
	}
	ctx, cancel := context.WithTimeout(v.t.Context(), 20*time.Second)
	defer cancel()
	for {
		_, raw, err := v.c.Read(ctx)
		if err != nil {
			v.t.Fatalf("waiting for a %s frame: %v; frames so far %v", typ, err, v.seen)
		}
		var f map[string]any
		if err := json.Unmarshal(raw, &f); err != nil {
			v.t.Fatalf("frame %q: %v", raw, err)
		}
		v.seen = append(v.seen, f)
		if f["type"] == typ {
			return f
		}
		v.pending = append(v.pending, f)
	}
}

// frameTypes lists the types of a frame's events.
func frameTypes(f map[string]any) []string {
	var out []string
	for _, e := range f["events"].([]any) {
		out = append(out, e.(map[string]any)["type"].(string))
	}
	return out
}

// TestViewersArePushedEventsAndTheReplyAsItIsWritten: a viewer syncs what
// was appended before it came, then gets every append and every piece of
// the agent's reply pushed; a viewer that joins in the middle of the reply
// gets the text so far; the end ends them all.
func TestViewersArePushedEventsAndTheReplyAsItIsWritten(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	id, tok, sb, _ := s.readySandbox(t, createBody("hello"))

	first := s.watch(t, id, tok, 0)
	sync := first.next("sync")
	if got := strings.Join(frameTypes(sync), ","); !strings.Contains(got, "agent.created") || !strings.Contains(got, "agent.ready") || sync["more"] != false {
		t.Fatalf("sync: %v", sync)
	}
	last := int64(sync["seq"].(float64))

	if r := s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "working"}); r.status != http.StatusOK {
		t.Fatalf("working: %d %s", r.status, r.raw)
	}
	s.appendEvents(t, id, sb, event("state.changed", map[string]any{"state": "working"}))
	pushed := first.next("events")
	if e := pushed["events"].([]any)[0].(map[string]any); e["type"] != "state.changed" || int64(e["seq"].(float64)) != last+1 {
		t.Fatalf("pushed %v, want state.changed numbered %d", pushed, last+1)
	}

	delta := func(offset int, text string) map[string]any {
		return map[string]any{"type": "agent.message.delta", "data": map[string]any{"message_id": "m-1", "offset": offset, "text": text}}
	}
	post := func(deltas ...any) {
		t.Helper()
		if r := s.call(http.MethodPost, "/sandbox/"+id+"/deltas", sb, map[string]any{"deltas": deltas}); r.status != http.StatusOK {
			t.Fatalf("deltas: %d %s", r.status, r.raw)
		}
	}
	post(delta(0, "The answer "), delta(11, "is "))
	live := first.next("live")
	if d := live["events"].([]any)[1].(map[string]any)["data"].(map[string]any); d["text"] != "is " || d["offset"] != 11.0 {
		t.Fatalf("live: %v", live)
	}

	// A viewer opened mid-reply reads the text so far.
	second := s.watch(t, id, tok, 0)
	p, _ := second.next("sync")["partial"].(map[string]any)
	if p["message_id"] != "m-1" || p["text"] != "The answer is " {
		t.Fatalf("partial %v, want the text so far", p)
	}
	post(map[string]any{"type": "tool.call.started", "data": map[string]any{"tool_call_id": "c1", "tool": "bash", "args": `{"command":"ls"}`}}, delta(14, "42."))
	for _, v := range []*viewer{first, second} {
		if got := strings.Join(frameTypes(v.next("live")), ","); got != "tool.call.started,agent.message.delta" {
			t.Errorf("live events %s", got)
		}
	}
	s.appendEvents(t, id, sb, event("agent.message", map[string]any{"message_id": "m-1", "text": "The answer is 42.", "tool_calls": 0}))
	for _, v := range []*viewer{first, second} {
		e := v.next("events")["events"].([]any)[0].(map[string]any)
		if e["type"] != "agent.message" || e["data"].(map[string]any)["message_id"] != "m-1" || e["data"].(map[string]any)["html"] == nil {
			t.Errorf("final message %v", e)
		}
	}

	// A wrong token, a bad frame: an error frame, nothing else.
	bad := s.watch(t, id, "wrong", 0)
	if e := bad.next("error")["error"].(map[string]any); e["status"] != 401.0 {
		t.Errorf("a wrong token: %v", e)
	}
	if err := bad.c.Write(t.Context(), websocket.MessageText, []byte(`{"action":"sync","after":-1}`)); err != nil {
		t.Fatal(err)
	}
	if e := bad.next("error")["error"].(map[string]any); e["status"] != 400.0 {
		t.Errorf("a bad sync: %v", e)
	}
	if r := s.call(http.MethodPost, "/sandbox/"+id+"/deltas", sb, map[string]any{"deltas": []any{map[string]any{"type": "agent.message", "data": map[string]any{}}}}); r.status != http.StatusBadRequest {
		t.Errorf("a stored event posted as live: %d %s", r.status, r.raw)
	}

	// The end: agent.ended, then the end frame.
	if r := s.shutdown(id, tok); r.status != http.StatusOK {
		t.Fatalf("shutdown: %d %s", r.status, r.raw)
	}
	for _, v := range []*viewer{first, second} {
		v.next("end")
		var ended bool
		for _, f := range v.seen {
			if f["type"] == "events" && strings.Contains(strings.Join(frameTypes(f), ","), "agent.ended") {
				ended = true
			}
		}
		if !ended {
			t.Errorf("the end frame came without agent.ended: %v", v.seen)
		}
	}
	// A viewer of the ended agent is synced, then told it is over.
	late := s.watch(t, id, tok, last)
	late.next("sync")
	late.next("end")
}
