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
)

// geminiSignature is the thought signature the server attaches to its function
// call (base64 in JSON), which must come back with the call.
const geminiSignature = "c2lnbmF0dXJl"

// geminiWire answers like the Gemini API's POST
// /v1beta/models/{model}:generateContent and :streamGenerateContent?alt=sse.
// Its 429 says when to retry the way the API does, in a RetryInfo detail.
func geminiWire(t *testing.T) wireFormat {
	return wireFormat{handle: geminiHandler(t), settings: func(body map[string]any) (any, any) {
		return field(body, "generationConfig", "temperature"), field(body, "generationConfig", "maxOutputTokens")
	}}
}

// geminiError is the API's error body.
func geminiError(w http.ResponseWriter, status int, name, details string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":"try later","status":%q,"details":[%s]}}`, status, name, details)
}

func geminiHandler(t *testing.T) handler {
	return func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, _ bool) {
		const base = "/v1beta/models/gemini-2.5-pro"
		stream := r.URL.Path == base+":streamGenerateContent" && r.URL.Query().Get("alt") == "sse"
		if !stream && r.URL.Path != base+":generateContent" || r.Header.Get("X-Goog-Api-Key") != "gemini-key" {
			t.Errorf("request %s %s key %q", r.Method, r.URL, r.Header.Get("X-Goog-Api-Key"))
		}
		if field(body, "systemInstruction", "parts") == nil {
			t.Errorf("systemInstruction %v", body["systemInstruction"])
		}
		tools, _ := body["tools"].([]any)
		if len(tools) != 1 || field(tools[0].(map[string]any), "functionDeclarations").([]any)[0].(map[string]any)["name"] != "read" {
			t.Errorf("tools %v", body["tools"])
		}
		contents, _ := body["contents"].([]any)
		if first, _ := contents[0].(map[string]any); first["role"] != "user" {
			t.Errorf("contents %v", contents)
		}
		// A text reply, with a thought the answer leaves out (thinking is billed
		// as output: 3 + 1 tokens).
		parts := []string{`{"text":"Hello ","thought":true}`, `{"text":"Hello there."}`}
		usage := `{"promptTokenCount":12,"candidatesTokenCount":3,"thoughtsTokenCount":1,"totalTokenCount":16}`
		switch {
		case scenario == scenario429 && n == 1:
			geminiError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}`)
			return
		case scenario == scenario500 && n == 1:
			geminiError(w, http.StatusInternalServerError, "INTERNAL", "")
			return
		case scenario == scenarioTool:
			parts = []string{`{"text":"Let me look."}`, `{"functionCall":{"id":"call_1","name":"read","args":{"path":"README.md"}},"thoughtSignature":"` + geminiSignature + `"}`}
			usage = `{"promptTokenCount":12,"candidatesTokenCount":9,"totalTokenCount":21}`
		case scenario == scenarioToolBack:
			last, _ := contents[len(contents)-1].(map[string]any)
			prev, _ := contents[len(contents)-2].(map[string]any)
			response, _ := field(last, "parts").([]any)[0].(map[string]any)["functionResponse"].(map[string]any)
			prevParts, _ := prev["parts"].([]any)
			call, _ := prevParts[len(prevParts)-1].(map[string]any)
			if last["role"] != "user" || response["id"] != "call_1" || response["name"] != "read" || field(response, "response", "output") != "# Demo" {
				t.Errorf("tool result not sent back: %v", last)
			}
			if prev["role"] != "model" || field(call, "functionCall", "name") != "read" || call["thoughtSignature"] != geminiSignature {
				t.Errorf("the call (with its thought signature) not sent back: %v", prev)
			}
			parts = []string{`{"text":"The file is titled Demo."}`}
			usage = `{"promptTokenCount":20,"candidatesTokenCount":6,"totalTokenCount":26}`
		}
		response := func(parts []string, finish, usage string) string {
			s := `{"candidates":[{"content":{"role":"model","parts":[` + strings.Join(parts, ",") + `]},"index":0`
			if finish != "" {
				s += `,"finishReason":"` + finish + `"`
			}
			s += `}]`
			if usage != "" {
				s += `,"usageMetadata":` + usage
			}
			return s + `,"modelVersion":"gemini-2.5-pro","responseId":"r1"}`
		}
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			chunks := []string{
				response([]string{`{"text":"Hello "}`}, "", `{"promptTokenCount":12,"totalTokenCount":12}`),
				response([]string{`{"text":"there."}`}, "STOP", usage),
			}
			if scenario == scenarioTool {
				chunks = []string{response(parts, "STOP", usage)}
			}
			for _, c := range chunks {
				fmt.Fprintf(w, "data: %s\r\n\r\n", c)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, response(parts, "STOP", usage))
	}
}

func TestGeminiContract(t *testing.T) {
	t.Parallel()
	contract(t, geminiWire(t), func(o providers.Options) llm.Provider {
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
	req := llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "read a and b"}}, Tools: []llm.Tool{readTool}}
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
		field(parts[0].(map[string]any), "functionResponse", "name") != "read" ||
		field(parts[0].(map[string]any), "functionResponse", "response", "output") != "A" ||
		field(parts[1].(map[string]any), "functionResponse", "response", "error") != "no such file" {
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
			geminiError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "")
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
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "")
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
