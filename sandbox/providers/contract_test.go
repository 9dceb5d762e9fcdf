package providers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// Scenarios every provider's wire-format server plays.
const (
	scenarioText     = "text"
	scenarioTool     = "tool"
	scenario429      = "429"
	scenario500      = "500"
	scenarioSlow     = "slow"
	scenarioToolBack = "tool_back" // checks the tool result was sent back
)

// wire is a local server speaking one provider's wire format. Its handle function
// answers one request for the current scenario; n counts requests of the scenario.
type wire struct {
	mu       sync.Mutex
	scenario string
	n        int
	times    []time.Time
	bodies   []map[string]any
	handle   func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, stream bool)
}

func (s *wire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	s.n++
	n, scenario := s.n, s.scenario
	s.times = append(s.times, time.Now())
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	if scenario == scenarioSlow {
		// Slower than any timeout: hold the request until the client gives up on
		// it. (Bounded, so that a client that never does fails the test.)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	}
	stream, _ := body["stream"].(bool)
	s.handle(w, r, scenario, n, body, stream)
}

func (s *wire) set(scenario string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenario, s.n, s.times, s.bodies = scenario, 0, nil, nil
}

func (s *wire) requests() ([]time.Time, []map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...), append([]map[string]any(nil), s.bodies...)
}

// newProvider builds the provider under test against baseURL.
type newProvider func(baseURL string, timeout time.Duration, retries int) llm.Provider

var readTool = llm.Tool{Name: "read", Description: "read a file", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}

// contract runs the provider contract suite: plain reply, tool call round trip,
// streaming, 429 with retry-after, 500 then success, timeout.
func contract(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, stream bool), build newProvider) {
	t.Helper()
	s := &wire{handle: handle}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	p := build(srv.URL, 2*time.Second, 3)
	req := llm.Request{Model: "claude-sonnet-4.5", System: "be brief", MaxTokens: 256,
		Messages: []llm.Message{{Role: llm.User, Content: "hello"}}, Tools: []llm.Tool{readTool}}

	t.Run("plain reply", func(t *testing.T) {
		s.set(scenarioText)
		res, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Content != "Hello there." || len(res.ToolCalls) != 0 || res.Usage.InputTokens != 12 || res.Usage.OutputTokens != 4 {
			t.Errorf("reply %+v", res)
		}
	})
	t.Run("tool call round trip", func(t *testing.T) {
		s.set(scenarioTool)
		res, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "read" || res.ToolCalls[0].ID != "call_1" {
			t.Fatalf("tool calls %+v", res)
		}
		var args struct{ Path string }
		if err := json.Unmarshal(res.ToolCalls[0].Args, &args); err != nil || args.Path != "README.md" {
			t.Errorf("args %s", res.ToolCalls[0].Args)
		}
		s.set(scenarioToolBack)
		next := req
		next.Messages = append(append([]llm.Message{}, req.Messages...),
			llm.Message{Role: llm.Assistant, ToolCalls: res.ToolCalls},
			llm.Message{Role: llm.ToolRole, ToolCallID: "call_1", Content: "# Demo", IsError: false})
		back, err := p.Chat(t.Context(), next)
		if err != nil {
			t.Fatal(err)
		}
		if back.Content != "The file is titled Demo." {
			t.Errorf("after tool result: %+v", back)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		s.set(scenarioText)
		ch, err := p.Stream(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		var deltas []string
		var done *llm.Response
		for e := range ch {
			switch e.Type {
			case llm.TextDelta:
				deltas = append(deltas, e.Text)
			case llm.Done:
				done = e.Response
			case llm.Failed:
				t.Fatal(e.Err)
			}
		}
		if len(deltas) < 2 || strings.Join(deltas, "") != "Hello there." || done == nil || done.Content != "Hello there." {
			t.Errorf("streamed %q, done %+v", deltas, done)
		}
	})
	t.Run("429 honours retry-after", func(t *testing.T) {
		s.set(scenario429)
		res, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		times, _ := s.requests()
		if res.Content != "Hello there." || len(times) != 2 {
			t.Fatalf("reply %+v after %d requests", res, len(times))
		}
		if gap := times[1].Sub(times[0]); gap < 900*time.Millisecond {
			t.Errorf("retried after %s, retry-after said 1 s", gap)
		}
	})
	t.Run("500 then success", func(t *testing.T) {
		s.set(scenario500)
		res, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if times, _ := s.requests(); res.Content != "Hello there." || len(times) != 2 {
			t.Errorf("reply %+v after %d requests", res, len(times))
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s.set(scenarioSlow)
		quick := build(srv.URL, 300*time.Millisecond, 0)
		began := time.Now()
		_, err := quick.Chat(t.Context(), req)
		if err == nil {
			t.Fatal("a call past its timeout succeeded")
		}
		if took := time.Since(began); took > 2*time.Second {
			t.Errorf("timed out after %s, configured 300ms", took)
		}
	})
}
