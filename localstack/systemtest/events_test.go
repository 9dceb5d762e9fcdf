package systemtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
)

// sseEvent is one Server-Sent Event as a client sees it.
type sseEvent struct {
	ID   int64
	Type string
	Data map[string]any
}

// sse is an open event stream.
type sse struct {
	events chan sseEvent
	status int
	cancel context.CancelFunc
}

// openSSE connects to an agent's event stream; lastID > 0 resumes after it.
func (s *stack) openSSE(t testing.TB, id, tok string, lastID int64, query string) *sse {
	t.Helper()
	h := http.Header{}
	if tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
	return s.openSSEWith(t, id, h, lastID, query)
}

// openSSEWith is openSSE with the request's headers.
func (s *stack) openSSEWith(t testing.TB, id string, h http.Header, lastID int64, query string) *sse {
	t.Helper()
	return s.openStream(t, "/api/remote_agents/"+id+"/events"+query, h, lastID)
}

// openStream connects to the Server-Sent Events at path with the request's
// headers; lastID > 0 resumes after it.
func (s *stack) openStream(t testing.TB, path string, h http.Header, lastID int64) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := &sse{events: make(chan sseEvent, 1000), status: res.StatusCode, cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		defer func() { _ = res.Body.Close() }()
		defer close(out.events)
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Type != "" {
					out.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.Type = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data)
			}
		}
	}()
	return out
}

// untilEnd returns the stream's events up to its `end` event, which it
// includes; it fails if the stream closes before it.
func (c *sse) untilEnd(t testing.TB, within time.Duration) []sseEvent {
	t.Helper()
	var got []sseEvent
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatalf("stream closed after %d events, without an end", len(got))
			}
			if got = append(got, ev); ev.Type == "end" {
				return got
			}
		case <-timeout:
			t.Fatalf("no end within %s (%d events)", within, len(got))
		}
	}
}

// next returns the stream's next n events.
func (c *sse) next(t testing.TB, n int) []sseEvent {
	t.Helper()
	var got []sseEvent
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatalf("stream closed after %d of %d events", len(got), n)
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("%d of %d events within 10s", len(got), n)
		}
	}
	return got
}

// emit appends events as the sandbox does.
func (s *stack) emit(t testing.TB, id, sb string, texts ...string) {
	t.Helper()
	var evs []any
	for _, text := range texts {
		evs = append(evs, map[string]any{"type": "agent.message", "data": map[string]any{"text": text}})
	}
	if r := s.call(http.MethodPost, "/sandbox/"+id+"/events", sb, map[string]any{"events": evs}); r.status != http.StatusOK {
		t.Fatalf("append: %d %s", r.status, r.raw)
	}
}

func ids(evs []sseEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func TestEventStreamResumesWithoutGapsOrDuplicates(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	a, tokA, sbA, _ := s.readySandbox(t, createBody("A"))
	b, tokB, sbB, _ := s.readySecond(t, a)

	// The viewers come in after the agent's lifecycle so far.
	lifeA, lifeB := s.lastSeq(t, a), s.lastSeq(t, b)
	viewer1 := s.openSSE(t, a, tokA, lifeA, "")
	viewer2 := s.openSSE(t, a, "", lifeA, "?token="+tokA) // the token as a query parameter works too
	// As CloudFront sends it on AWS: its own signature in Authorization, the
	// token in X-Session-Token.
	signed := http.Header{"Authorization": {"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/lambda/aws4_request, SignedHeaders=host, Signature=00"}, "X-Session-Token": {tokA}}
	viewer3 := s.openSSEWith(t, a, signed, lifeA, "")
	if viewer1.status != http.StatusOK || viewer2.status != http.StatusOK || viewer3.status != http.StatusOK {
		t.Fatalf("streams: %d %d %d", viewer1.status, viewer2.status, viewer3.status)
	}
	s.emit(t, a, sbA, "one", "two", "three")
	s.emit(t, b, sbB, "B only")
	first := viewer1.next(t, 3)
	if first[0].Type != "agent.message" || first[0].Data["data"].(map[string]any)["text"] != "one" {
		t.Fatalf("first event %+v", first[0])
	}
	// Disconnect mid-stream; more events happen meanwhile.
	viewer1.cancel()
	s.emit(t, a, sbA, "four", "five")
	resumed := s.openSSE(t, a, tokA, first[2].ID, "")
	got := resumed.next(t, 2)
	if fmt.Sprint(ids(got)) != fmt.Sprint([]int64{first[2].ID + 1, first[2].ID + 2}) || got[0].Data["data"].(map[string]any)["text"] != "four" {
		t.Errorf("resumed with %v (%+v), want the two missed events", ids(got), got)
	}
	s.emit(t, a, sbA, "six")
	if more := resumed.next(t, 1); more[0].ID != first[2].ID+3 {
		t.Errorf("after resuming: %v", ids(more))
	}
	if got := viewer3.next(t, 1); got[0].ID != first[0].ID {
		t.Errorf("viewer 3 (X-Session-Token) saw %v first", ids(got))
	}
	// The second viewer saw the same sequence, and nothing of agent B.
	all := viewer2.next(t, 6)
	for i, e := range all {
		if e.ID != first[0].ID+int64(i) {
			t.Errorf("viewer 2 saw %v", ids(all))
			break
		}
		if text := e.Data["data"].(map[string]any)["text"]; text == "B only" {
			t.Error("a viewer of A saw B's event")
		}
	}
	// B's stream holds B's events only; A's token opens nothing of B.
	bStream := s.openSSE(t, b, tokB, lifeB, "")
	if evs := bStream.next(t, 1); evs[0].Data["data"].(map[string]any)["text"] != "B only" {
		t.Errorf("B's stream: %+v", evs)
	}
	if denied := s.openSSE(t, b, tokA, 0, ""); denied.status != http.StatusUnauthorized {
		t.Errorf("A's token on B's stream: %d", denied.status)
	}
	if r := s.call(http.MethodGet, "/api/remote_agents/"+a+"/events", "", nil); r.status != http.StatusUnauthorized || r.str("error_code") != "missing_token" {
		t.Errorf("no token: %d %s", r.status, r.raw)
	}
	if r := s.call(http.MethodGet, "/api/remote_agents/"+a+"/events?last_event_id=x", tokA, nil); r.status != http.StatusBadRequest {
		t.Errorf("bad Last-Event-ID: %d %s", r.status, r.raw)
	}
	// When the agent ends, the stream says so and closes.
	s.shutdown(a, tokA)
	s.call(http.MethodPost, "/sandbox/"+a+"/status", sbA, map[string]any{"state": "ended"})
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-resumed.events:
			if !ok {
				t.Fatal("stream closed without an end event")
			}
			if ev.Type != "end" {
				continue
			}
			return
		case <-deadline:
			t.Fatal("no end event")
		}
	}
}
