// Package providertest is the model providers' contract suite and the local
// servers it runs against, each speaking one provider's wire format
// (Anthropic, OpenAI and its dialects, Gemini, Bedrock). Run checks a
// provider adapter against the documented behaviour of package providers:
// plain replies, tool calls, streaming, 429 with Retry-After, 500 then
// success, timeouts, settings in the provider's field names, usage in every
// result. It runs against the servers directly (package providers' tests)
// and through the platform's model gateway (the dev server's tests), whose
// metering it lets compare with what the servers sent (Tally).
package providertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
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

// The usage each wire format reports: a text reply, a tool call, the answer
// after a tool result.
var (
	textUsage     = llm.Usage{InputTokens: 12, OutputTokens: 4}
	toolUsage     = llm.Usage{InputTokens: 12, OutputTokens: 9}
	toolBackUsage = llm.Usage{InputTokens: 20, OutputTokens: 6}
)

// handler answers one request of a scenario; n counts the scenario's requests
// (from 1) and stream says whether the client asked for a stream.
type handler func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, stream bool)

// WireFormat is one provider's wire format, as a local server speaks it. It
// answers text and tool calls, whole and streamed: for scenarioText "Hello
// there." (streamed in at least two parts) with textUsage; for scenarioTool a
// call "call_1" of read with {"path":"README.md"} with toolUsage; for
// scenarioToolBack, after checking the tool result came back, "The file is
// titled Demo." with toolBackUsage; 429 with "Retry-After: 1" and then 500
// before the scenario's first success.
type WireFormat struct {
	handle handler
	// settings reads the temperature and the bound on the reply from a request
	// body, in the provider's field names; nil where absent.
	settings func(body map[string]any) (temperature, maxTokens any)
	// noTemperature says that the API takes no temperature, which must not be sent.
	noTemperature bool
}

// wire is a local server speaking one provider's wire format, recording the
// requests of the current scenario and checking each one's settings.
type wire struct {
	t        testing.TB
	format   WireFormat
	mu       sync.Mutex
	scenario string
	n        int
	times    []time.Time
	bodies   []map[string]any
	// want are the temperature and max tokens every request must carry.
	wantTemperature, wantMaxTokens any
}

func (s *wire) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	s.n++
	n, scenario := s.n, s.scenario
	s.times = append(s.times, time.Now())
	s.bodies = append(s.bodies, body)
	wantTemperature, wantMaxTokens := s.wantTemperature, s.wantMaxTokens
	s.mu.Unlock()
	temperature, maxTokens := s.format.settings(body)
	if wantTemperature != anySettings && (temperature != wantTemperature || maxTokens != wantMaxTokens) {
		s.t.Errorf("%s request %d: temperature %v, max tokens %v; want %v, %v", scenario, n, temperature, maxTokens, wantTemperature, wantMaxTokens)
	}
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
	s.format.handle(w, r, scenario, n, body, stream)
}

// set starts a scenario whose requests must carry temperature and maxTokens
// (as JSON decodes them: float64, or nil for absent).
func (s *wire) set(scenario string, temperature, maxTokens any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenario, s.n, s.times, s.bodies = scenario, 0, nil, nil
	s.wantTemperature, s.wantMaxTokens = temperature, maxTokens
}

func (s *wire) requests() ([]time.Time, []map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...), append([]map[string]any(nil), s.bodies...)
}

// Build builds the provider under test with o, which the suite fills with
// the server's address, the timeout, retries and settings; the builder adds
// the key and the model (and, through a gateway, its own address).
type Build func(o providers.Options) llm.Provider

// ReadTool is the tool the suite offers the model.
var ReadTool = llm.Tool{Name: "read", Description: "read a file", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}

// The settings the suite configures: a request's bound wins over the
// configured one, which applies to requests without.
const (
	suiteTemperature = 0.25
	suiteMaxTokens   = 512
	requestMaxTokens = 256
)

// Server is a local server speaking one provider's wire format.
type Server struct {
	// URL is its address: the provider's base URL (Mistral's and local
	// servers' add /v1).
	URL string
	w   *wire
}

// NewServer starts a server speaking format until the test ends.
func NewServer(t testing.TB, format WireFormat) *Server {
	t.Helper()
	w := &wire{t: t, format: format}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, w: w}
}

// anySettings marks a scenario that takes any temperature and max tokens.
var anySettings = new(struct{})

// Reply has the server answer every request from now on with the text reply
// ("Hello there.", whole or streamed), whatever its settings: the server of
// a benchmark.
func (srv *Server) Reply() { srv.w.set(scenarioText, anySettings, anySettings) }

// Tally is what a provider reported over a run of the suite: the usage of
// its successful results (each checked equal to what the server sent) and
// how many there were. The server answered exactly these calls with a 2xx.
type Tally struct {
	Usage llm.Usage
	Calls int
}

func (t *Tally) add(u llm.Usage) {
	t.Usage.InputTokens += u.InputTokens
	t.Usage.OutputTokens += u.OutputTokens
	t.Calls++
}

// Run runs the provider contract suite against the provider build makes,
// over a local server speaking format: plain reply, tool call round trip,
// streaming (text and a tool call), 429 with Retry-After, 500 then success,
// timeout; temperature and max tokens in every request, in the provider's
// field names; usage in every result.
func Run(t *testing.T, format WireFormat, build Build) Tally {
	t.Helper()
	return NewServer(t, format).Run(t, build)
}

// Run runs the contract suite (see the function Run) over srv and returns
// what the provider reported.
func (srv *Server) Run(t *testing.T, build Build) Tally {
	t.Helper()
	s, format := srv.w, srv.w.format
	var tally Tally
	temperature := suiteTemperature
	wantTemperature := any(suiteTemperature)
	if format.noTemperature {
		wantTemperature = nil
	}
	options := func(timeout time.Duration, retries int, temperature *float64) providers.Options {
		return providers.Options{BaseURL: srv.URL, Timeout: timeout, MaxRetries: retries, MaxTokens: suiteMaxTokens, Temperature: temperature}
	}
	tempOf := &temperature
	if format.noTemperature {
		tempOf = nil
	}
	// The calls may retry with backoff (Bedrock jitters up to 2 s after a 500):
	// the timeout covers retries, and only the timeout scenario tests it.
	p := build(options(10*time.Second, 3, tempOf))
	req := llm.Request{Model: "", System: "be brief", MaxTokens: requestMaxTokens,
		Messages: []llm.Message{{Role: llm.User, Content: "hello"}}, Tools: []llm.Tool{ReadTool}}
	set := func(scenario string) { s.set(scenario, wantTemperature, float64(requestMaxTokens)) }

	t.Run("plain reply", func(t *testing.T) {
		set(scenarioText)
		res, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		tally.add(res.Usage)
		if res.Content != "Hello there." || len(res.ToolCalls) != 0 || res.Usage != textUsage {
			t.Errorf("reply %+v, want Hello there. and usage %+v", res, textUsage)
		}
	})
	t.Run("tool call round trip", func(t *testing.T) {
		set(scenarioTool)
		res, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		tally.add(res.Usage)
		checkToolCall(t, res.ToolCalls)
		if res.Usage != toolUsage {
			t.Errorf("usage %+v, want %+v", res.Usage, toolUsage)
		}
		set(scenarioToolBack)
		next := req
		next.Messages = append(append([]llm.Message{}, req.Messages...),
			llm.Message{Role: llm.Assistant, Content: res.Content, ToolCalls: res.ToolCalls},
			llm.Message{Role: llm.ToolRole, ToolCallID: "call_1", Content: "# Demo", IsError: false})
		back, err := p.Chat(t.Context(), next)
		if err != nil {
			t.Fatal(err)
		}
		tally.add(back.Usage)
		if back.Content != "The file is titled Demo." || back.Usage != toolBackUsage {
			t.Errorf("after tool result: %+v", back)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		set(scenarioText)
		deltas, calls, done := collect(t, p, req)
		tally.add(done.Usage)
		if len(deltas) < 2 || strings.Join(deltas, "") != "Hello there." || len(calls) != 0 {
			t.Errorf("streamed %q and calls %+v", deltas, calls)
		}
		if done.Content != "Hello there." || done.Usage != textUsage {
			t.Errorf("done %+v, want usage %+v", done, textUsage)
		}
	})
	t.Run("streaming a tool call", func(t *testing.T) {
		set(scenarioTool)
		_, calls, done := collect(t, p, req)
		tally.add(done.Usage)
		checkToolCall(t, calls)
		checkToolCall(t, done.ToolCalls)
		if done.Usage != toolUsage {
			t.Errorf("usage %+v, want %+v", done.Usage, toolUsage)
		}
	})
	t.Run("429 honours retry-after", func(t *testing.T) {
		set(scenario429)
		res, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		tally.add(res.Usage)
		times, _ := s.requests()
		if res.Content != "Hello there." || len(times) != 2 {
			t.Fatalf("reply %+v after %d requests", res, len(times))
		}
		if gap := times[1].Sub(times[0]); gap < 900*time.Millisecond {
			t.Errorf("retried after %s, retry-after said 1 s", gap)
		}
	})
	t.Run("500 then success", func(t *testing.T) {
		set(scenario500)
		res, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		tally.add(res.Usage)
		if times, _ := s.requests(); res.Content != "Hello there." || len(times) != 2 {
			t.Errorf("reply %+v after %d requests", res, len(times))
		}
	})
	t.Run("configured max tokens and no temperature", func(t *testing.T) {
		s.set(scenarioText, nil, float64(suiteMaxTokens))
		// A generous timeout: a call the client gave up on would still be
		// metered by a gateway in front, and the tally would miss it.
		plain := build(options(10*time.Second, 0, nil))
		unbounded := req
		unbounded.MaxTokens = 0
		res, err := plain.Chat(t.Context(), unbounded)
		if err == nil {
			tally.add(res.Usage)
		}
		if err != nil || res.Usage != textUsage {
			t.Errorf("%+v, %v", res, err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		set(scenarioSlow)
		quick := build(options(300*time.Millisecond, 0, tempOf))
		began := time.Now()
		_, err := quick.Chat(t.Context(), req)
		if err == nil {
			t.Fatal("a call past its timeout succeeded")
		}
		if took := time.Since(began); took > 2*time.Second {
			t.Errorf("timed out after %s, configured 300ms", took)
		}
	})
	return tally
}

// collect streams req from p until Done, failing the test on Failed.
func collect(t *testing.T, p llm.Provider, req llm.Request) (deltas []string, calls []llm.ToolCall, done llm.Response) {
	t.Helper()
	ch, err := p.Stream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got *llm.Response
	for e := range ch {
		switch e.Type {
		case llm.TextDelta:
			deltas = append(deltas, e.Text)
		case llm.ToolCallDone:
			calls = append(calls, *e.ToolCall)
		case llm.Done:
			got = e.Response
		case llm.Failed:
			t.Fatal(e.Err)
		}
	}
	if got == nil {
		t.Fatal("the stream ended without Done")
	}
	return deltas, calls, *got
}

// checkToolCall checks calls are the one call of scenarioTool.
func checkToolCall(t *testing.T, calls []llm.ToolCall) {
	t.Helper()
	if len(calls) != 1 || calls[0].Name != "read" || calls[0].ID != "call_1" {
		t.Fatalf("tool calls %+v", calls)
	}
	var args struct{ Path string }
	if err := json.Unmarshal(calls[0].Args, &args); err != nil || args.Path != "README.md" {
		t.Errorf("args %s", calls[0].Args)
	}
}

// Field returns body's value at path (object keys), nil where absent.
func Field(body map[string]any, path ...string) any {
	var v any = body
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
