package providers_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
)

// openaiWire answers like POST /chat/completions of the OpenAI API (and of
// LiteLLM and other compatible servers).
func openaiWire(t *testing.T) func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, stream bool) {
	return func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, stream bool) {
		if r.URL.Path != "/chat/completions" || r.Header.Get("Authorization") != "Bearer test-key" {
			t.Errorf("request %s %s auth %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		}
		if body["model"] != "anthropic/claude-sonnet-4-5" || body["max_completion_tokens"] != float64(256) {
			t.Errorf("model/max tokens in %v", body)
		}
		msgs, _ := body["messages"].([]any)
		if first, _ := msgs[0].(map[string]any); first["role"] != "system" {
			t.Errorf("system message first: %v", msgs)
		}
		if tools, _ := body["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["function"].(map[string]any)["name"] != "read" {
			t.Errorf("tools %v", body["tools"])
		}
		errorJSON := func(status int) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error":{"message":"try later","type":"server_error"}}`)
		}
		message := `{"role":"assistant","content":"Hello there."}`
		finish := "stop"
		switch {
		case scenario == scenario429 && n == 1:
			w.Header().Set("Retry-After", "1")
			errorJSON(http.StatusTooManyRequests)
			return
		case scenario == scenario500 && n == 1:
			errorJSON(http.StatusInternalServerError)
			return
		case scenario == scenarioTool:
			message = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"README.md\"}"}}]}`
			finish = "tool_calls"
		case scenario == scenarioToolBack:
			last, _ := msgs[len(msgs)-1].(map[string]any)
			prev, _ := msgs[len(msgs)-2].(map[string]any)
			calls, _ := prev["tool_calls"].([]any)
			if last["role"] != "tool" || last["tool_call_id"] != "call_1" || last["content"] != "# Demo" || prev["role"] != "assistant" || len(calls) != 1 {
				t.Errorf("tool result not sent back: %v / %v", prev, last)
			}
			message = `{"role":"assistant","content":"The file is titled Demo."}`
		}
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range []string{
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello "},"finish_reason":null}]}`,
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"there."},"finish_reason":null}]}`,
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`,
			} {
				fmt.Fprintf(w, "data: %s\n\n", c)
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`, message, finish)
	}
}

func TestOpenAIContract(t *testing.T) {
	t.Parallel()
	contract(t, openaiWire(t), func(baseURL string, timeout time.Duration, retries int) llm.Provider {
		return providers.NewOpenAI("test-key", baseURL, "claude-sonnet-4.5", timeout, retries)
	})
}
