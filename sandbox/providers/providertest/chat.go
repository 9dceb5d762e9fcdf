package providertest

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// chatServer is a server of the chat completions wire format: OpenAI's, and
// the dialects of Mistral and of local servers (Ollama, vLLM), which differ
// in where they serve it, the key, the field bounding a reply and the fields
// they refuse.
type chatServer struct {
	// path is the route, model the model the request must name.
	path, model string
	// auth is the Authorization header every request must carry ("": none).
	auth string
	// maxTokens is the field bounding a reply.
	maxTokens string
	// allowed, if set, are the only top-level fields accepted: like Mistral,
	// the server refuses any other with 422 extra_forbidden.
	allowed []string
}

// The chat completions servers of the providers.
var (
	openaiServer = chatServer{path: "/chat/completions", model: "anthropic/claude-sonnet-4-5", auth: "Bearer test-key", maxTokens: "max_completion_tokens"}
	// mistralServer accepts the fields of Mistral's chat completions API
	// (docs.mistral.ai/api, "Extra inputs are not permitted" for others).
	mistralServer = chatServer{path: "/v1/chat/completions", model: "mistral-large-latest", auth: "Bearer mistral-key", maxTokens: "max_tokens",
		allowed: []string{"model", "messages", "temperature", "top_p", "max_tokens", "stream", "stop", "random_seed", "response_format",
			"tools", "tool_choice", "presence_penalty", "frequency_penalty", "n", "prediction", "parallel_tool_calls", "prompt_mode", "safe_prompt"}}
	// localServer is Ollama's /v1 (and vLLM's): max_tokens, no key.
	localServer = chatServer{path: "/v1/chat/completions", model: "llama3.2", maxTokens: "max_tokens"}
)

// OpenAI answers like OpenAI's chat completions API at /chat/completions,
// for model anthropic/claude-sonnet-4-5 (through LiteLLM) and key "test-key".
func OpenAI(t testing.TB) WireFormat { return openaiServer.wire(t) }

// Mistral answers like Mistral's at /v1/chat/completions, for model
// mistral-large-latest and key "mistral-key", refusing fields Mistral does
// not take.
func Mistral(t testing.TB) WireFormat { return mistralServer.wire(t) }

// Local answers like a local server's OpenAI-compatible API (Ollama's /v1,
// vLLM) at /v1/chat/completions, for model llama3.2 and no key.
func Local(t testing.TB) WireFormat { return localServer.wire(t) }

// wire is the server's wire format.
func (c chatServer) wire(t testing.TB) WireFormat {
	return WireFormat{handle: c.handler(t), settings: func(body map[string]any) (any, any) {
		return body["temperature"], body[c.maxTokens]
	}}
}

func (c chatServer) handler(t testing.TB) handler {
	return func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, stream bool) {
		if r.URL.Path != c.path || r.Header.Get("Authorization") != c.auth {
			t.Errorf("request %s %s auth %q, want %s auth %q", r.Method, r.URL.Path, r.Header.Get("Authorization"), c.path, c.auth)
		}
		if org, project := r.Header.Get("OpenAI-Organization"), r.Header.Get("OpenAI-Project"); c.model != openaiServer.model && (org != "" || project != "") {
			t.Errorf("OpenAI's organization %q and project %q sent elsewhere", org, project)
		}
		errorJSON := func(status int, message string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":%q,"type":"server_error"}}`, message)
		}
		if c.allowed != nil {
			for k := range body {
				if !slices.Contains(c.allowed, k) {
					t.Errorf("field %s sent, which the server refuses", k)
					errorJSON(http.StatusUnprocessableEntity, "Extra inputs are not permitted: "+k)
					return
				}
			}
		}
		if body["model"] != c.model {
			t.Errorf("model %v, want %s", body["model"], c.model)
		}
		msgs, _ := body["messages"].([]any)
		if first, _ := msgs[0].(map[string]any); first["role"] != "system" {
			t.Errorf("system message first: %v", msgs)
		}
		if tools, _ := body["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["function"].(map[string]any)["name"] != "read" {
			t.Errorf("tools %v", body["tools"])
		}
		message := `{"role":"assistant","content":"Hello there."}`
		finish, usage := "stop", textUsage
		switch {
		case scenario == scenario429 && n == 1:
			w.Header().Set("Retry-After", "1")
			errorJSON(http.StatusTooManyRequests, "try later")
			return
		case scenario == scenario500 && n == 1:
			errorJSON(http.StatusInternalServerError, "try later")
			return
		case scenario == scenarioTool:
			message = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"README.md\"}"}}]}`
			finish, usage = "tool_calls", toolUsage
		case scenario == scenarioToolBack:
			last, _ := msgs[len(msgs)-1].(map[string]any)
			prev, _ := msgs[len(msgs)-2].(map[string]any)
			calls, _ := prev["tool_calls"].([]any)
			if last["role"] != "tool" || last["tool_call_id"] != "call_1" || last["content"] != "# Demo" || prev["role"] != "assistant" || len(calls) != 1 {
				t.Errorf("tool result not sent back: %v / %v", prev, last)
			}
			message = `{"role":"assistant","content":"The file is titled Demo."}`
			usage = toolBackUsage
		}
		usageJSON := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, usage.InputTokens, usage.OutputTokens, usage.InputTokens+usage.OutputTokens)
		if stream {
			c.stream(w, scenario, Field(body, "stream_options", "include_usage") == true, usageJSON)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":%s}`, message, finish, usageJSON)
	}
}

// stream answers with chunks: usage in a last chunk of its own when the client
// asked for it (OpenAI, Ollama, vLLM), else in the finishing chunk (Mistral,
// which sends it unasked).
func (c chatServer) stream(w http.ResponseWriter, scenario string, usageChunk bool, usageJSON string) {
	w.Header().Set("Content-Type", "text/event-stream")
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	deltas := []string{
		`{"index":0,"delta":{"role":"assistant","content":"Hello "},"finish_reason":null}`,
		`{"index":0,"delta":{"content":"there."},"finish_reason":null}`,
	}
	finish := "stop"
	if scenario == scenarioTool {
		deltas = []string{
			`{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}`,
			`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]},"finish_reason":null}`,
			`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"README.md\"}"}}]},"finish_reason":null}`,
		}
		finish = "tool_calls"
	}
	var chunks []string
	for _, d := range deltas {
		chunks = append(chunks, head+d+`]}`)
	}
	last := head + fmt.Sprintf(`{"index":0,"delta":{},"finish_reason":%q}]`, finish)
	if usageChunk {
		chunks = append(chunks, last+`}`, head+`],"usage":`+usageJSON+`}`)
	} else {
		chunks = append(chunks, last+`,"usage":`+usageJSON+`}`)
	}
	for _, chunk := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", chunk)
		w.(http.Flusher).Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
