package providertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Anthropic answers like POST /v1/messages of the Anthropic API, version
// 2026-10-21 (the SDK's): no temperature, which it refuses with a 400. The
// key it takes is "test-key".
func Anthropic(t testing.TB) WireFormat {
	return WireFormat{handle: anthropicHandler(t), noTemperature: true, settings: func(body map[string]any) (any, any) {
		return body["temperature"], body["max_tokens"]
	}}
}

func anthropicHandler(t testing.TB) handler {
	return func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, stream bool) {
		key := r.Header.Get("X-Api-Key")
		if key == "" {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if r.URL.Path != "/v1/messages" || key != "test-key" || r.Header.Get("Anthropic-Version") == "" {
			t.Errorf("request %s %s key %q version %q", r.Method, r.URL.Path, key, r.Header.Get("Anthropic-Version"))
		}
		if body["model"] != "claude-sonnet-4-5" {
			t.Errorf("model in %v", body)
		}
		if sys, _ := body["system"].([]any); len(sys) != 1 {
			t.Errorf("system %v", body["system"])
		}
		if tools, _ := body["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["name"] != "read" {
			t.Errorf("tools %v", body["tools"])
		}
		errorJSON := func(status int, kind string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":"try later"}}`, kind)
		}
		if _, ok := body["temperature"]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"temperature: Extra inputs are not permitted"}}`)
			return
		}
		text := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello there."}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":4}}`
		switch {
		case scenario == scenario429 && n == 1:
			w.Header().Set("Retry-After", "1")
			errorJSON(http.StatusTooManyRequests, "rate_limit_error")
			return
		case scenario == scenario500 && n == 1:
			errorJSON(http.StatusInternalServerError, "api_error")
			return
		case scenario == scenarioTool:
			text = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"call_1","name":"read","input":{"path":"README.md"}}],"stop_reason":"tool_use","usage":{"input_tokens":12,"output_tokens":9}}`
		case scenario == scenarioToolBack:
			msgs, _ := body["messages"].([]any)
			last, _ := msgs[len(msgs)-1].(map[string]any)
			content, _ := last["content"].([]any)
			block, _ := content[0].(map[string]any)
			if last["role"] != "user" || block["type"] != "tool_result" || block["tool_use_id"] != "call_1" {
				t.Errorf("tool result not sent back: %v", last)
			}
			prev, _ := msgs[len(msgs)-2].(map[string]any)
			if prevContent, _ := prev["content"].([]any); prev["role"] != "assistant" || len(prevContent) != 2 || prevContent[1].(map[string]any)["type"] != "tool_use" {
				t.Errorf("assistant tool use not replayed: %v", prev)
			}
			text = `{"id":"msg_3","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"The file is titled Demo."}],"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":6}}`
		}
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			events := []string{
				`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
				`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello "}}`,
				`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"there."}}`,
				`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
				`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}`,
				`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
			}
			if scenario == scenarioTool {
				events = []string{
					`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
					`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"call_1","name":"read","input":{}}}`,
					`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`,
					`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"README.md\"}"}}`,
					`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
					`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`,
					`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
				}
			}
			for _, e := range events {
				fmt.Fprint(w, e+"\n\n")
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(strings.TrimSpace(text)))
	}
}
