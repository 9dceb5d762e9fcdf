package providers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/providers/providertest"
)

func TestGeminiContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Gemini(t), func(o providers.Options) llm.Provider {
		o.APIKey, o.Model = "gemini-key", "gemini-2.5-pro"
		p, err := providers.NewGemini(o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// TestGeminiCallsWithoutID checks that calls the API sends without an ID get
// distinct ones, which are not sent back to it, while the results still name
// their function.
func TestGeminiCallsWithoutID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"read","args":{"path":"a"}}},{"functionCall":{"name":"read","args":{"path":"b"}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2}}`)
	}))
	t.Cleanup(srv.Close)
	p, err := providers.NewGemini(providers.Options{APIKey: "k", BaseURL: srv.URL, Model: "gemini-2.5-flash", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "read a and b"}}, Tools: []llm.Tool{providertest.ReadTool}}
	res, err := p.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].ID == "" || res.ToolCalls[0].ID == res.ToolCalls[1].ID || res.Usage != (llm.Usage{InputTokens: 5, OutputTokens: 2}) {
		t.Fatalf("calls %+v", res)
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.Assistant, ToolCalls: res.ToolCalls},
		llm.Message{Role: llm.ToolRole, ToolCallID: res.ToolCalls[0].ID, Content: "A"},
		llm.Message{Role: llm.ToolRole, ToolCallID: res.ToolCalls[1].ID, Content: "no such file", IsError: true})
	if _, err := p.Chat(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	contents := got[1]["contents"].([]any)
	raw, _ := json.Marshal(contents)
	if strings.Contains(string(raw), `"id"`) {
		t.Errorf("IDs the API did not give were sent to it: %s", raw)
	}
	last := contents[len(contents)-1].(map[string]any)
	parts := last["parts"].([]any)
	if len(contents) != 3 || len(parts) != 2 ||
		providertest.Field(parts[0].(map[string]any), "functionResponse", "name") != "read" ||
		providertest.Field(parts[0].(map[string]any), "functionResponse", "response", "output") != "A" ||
		providertest.Field(parts[1].(map[string]any), "functionResponse", "response", "error") != "no such file" {
		t.Errorf("results, in one turn, naming their function: %s", raw)
	}
	// A result answering no call of the conversation is an error, not a request.
	req.Messages = append(req.Messages, llm.Message{Role: llm.ToolRole, ToolCallID: "nope", Content: "?"})
	if _, err := p.Chat(t.Context(), req); err == nil || !strings.Contains(err.Error(), "answers no call") {
		t.Errorf("stray tool result: %v", err)
	}
}

// TestGeminiHonoursRetryAfter checks the Retry-After header too, which
// proxies in front of the API send.
func TestGeminiHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			providertest.GeminiError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}]}`)
	}))
	t.Cleanup(srv.Close)
	p, err := providers.NewGemini(providers.Options{APIKey: "k", BaseURL: srv.URL, Model: "gemini-2.5-flash", Timeout: 5 * time.Second, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}})
	if err != nil || res.Content != "ok" {
		t.Fatalf("%+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 2 || times[1].Sub(times[0]) < 900*time.Millisecond {
		t.Errorf("%d requests, retried after %v; Retry-After said 1 s", len(times), times[len(times)-1].Sub(times[0]))
	}
}

// TestGeminiGivesUpWithTheAPIError checks that once the retries are spent the
// API's error is reported.
func TestGeminiGivesUpWithTheAPIError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		providertest.GeminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "")
	}))
	t.Cleanup(srv.Close)
	p, err := providers.NewGemini(providers.Options{APIKey: "k", BaseURL: srv.URL, Model: "gemini-2.5-flash", Timeout: 5 * time.Second, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}})
	if err == nil || !strings.Contains(err.Error(), "INVALID_ARGUMENT") {
		t.Errorf("error %v, want the API's", err)
	}
}
