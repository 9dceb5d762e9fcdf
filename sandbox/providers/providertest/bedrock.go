package providertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Bedrock answers like the Bedrock runtime's Converse and ConverseStream
// (REST JSON; the stream in the AWS event stream encoding), for model
// us.anthropic.claude-sonnet-4-5…, to calls signed with SigV4.
func Bedrock(t testing.TB) WireFormat {
	return WireFormat{handle: bedrockHandler(t), settings: func(body map[string]any) (any, any) {
		return Field(body, "inferenceConfig", "temperature"), Field(body, "inferenceConfig", "maxTokens")
	}}
}

func bedrockHandler(t testing.TB) handler {
	return func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, _ bool) {
		stream := strings.HasSuffix(r.URL.Path, "/converse-stream")
		if !strings.HasPrefix(r.URL.Path, "/model/us.anthropic.claude-sonnet-4-5") || !strings.Contains(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
			t.Errorf("request %s %s auth %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		}
		if sys, _ := body["system"].([]any); len(sys) != 1 {
			t.Errorf("system %v", body["system"])
		}
		tools, _ := body["toolConfig"].(map[string]any)["tools"].([]any)
		if len(tools) != 1 || tools[0].(map[string]any)["toolSpec"].(map[string]any)["name"] != "read" {
			t.Errorf("tools %v", body["toolConfig"])
		}
		fail := func(status int, kind string) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-Errortype", kind)
			w.WriteHeader(status)
			fmt.Fprint(w, `{"message":"try later"}`)
		}
		reply := `{"output":{"message":{"role":"assistant","content":[{"text":"Hello there."}]}},"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":4,"totalTokens":16},"metrics":{"latencyMs":3}}`
		switch {
		case scenario == scenario429 && n == 1:
			w.Header().Set("Retry-After", "1")
			fail(http.StatusTooManyRequests, "ThrottlingException")
			return
		case scenario == scenario500 && n == 1:
			fail(http.StatusInternalServerError, "InternalServerException")
			return
		case scenario == scenarioTool:
			reply = `{"output":{"message":{"role":"assistant","content":[{"text":"Let me look."},{"toolUse":{"toolUseId":"call_1","name":"read","input":{"path":"README.md"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":12,"outputTokens":9,"totalTokens":21},"metrics":{"latencyMs":3}}`
		case scenario == scenarioToolBack:
			msgs, _ := body["messages"].([]any)
			last, _ := msgs[len(msgs)-1].(map[string]any)
			prev, _ := msgs[len(msgs)-2].(map[string]any)
			result, _ := last["content"].([]any)[0].(map[string]any)["toolResult"].(map[string]any)
			prevContent, _ := prev["content"].([]any)
			use, _ := prevContent[len(prevContent)-1].(map[string]any)["toolUse"].(map[string]any)
			if last["role"] != "user" || result["toolUseId"] != "call_1" || prev["role"] != "assistant" || use["name"] != "read" {
				t.Errorf("tool result not sent back: %v / %v", prev, last)
			}
			reply = `{"output":{"message":{"role":"assistant","content":[{"text":"The file is titled Demo."}]}},"stopReason":"end_turn","usage":{"inputTokens":20,"outputTokens":6,"totalTokens":26},"metrics":{"latencyMs":3}}`
		}
		if stream {
			// Each event stream on a connection of its own: one reused after
			// a stream was closed was seen closed under the next one's read on
			// a loaded machine ("use of closed network connection").
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			enc := eventstream.NewEncoder()
			events := [][2]string{
				{"messageStart", `{"role":"assistant"}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello "}}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"there."}}`},
				{"contentBlockStop", `{"contentBlockIndex":0}`},
				{"messageStop", `{"stopReason":"end_turn"}`},
				{"metadata", `{"usage":{"inputTokens":12,"outputTokens":4,"totalTokens":16},"metrics":{"latencyMs":3}}`},
			}
			if scenario == scenarioTool {
				events = [][2]string{
					{"messageStart", `{"role":"assistant"}`},
					{"contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"call_1","name":"read"}}}`},
					{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"path\":"}}}`},
					{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"\"README.md\"}"}}}`},
					{"contentBlockStop", `{"contentBlockIndex":0}`},
					{"messageStop", `{"stopReason":"tool_use"}`},
					{"metadata", `{"usage":{"inputTokens":12,"outputTokens":9,"totalTokens":21},"metrics":{"latencyMs":3}}`},
				}
			}
			for _, e := range events {
				msg := eventstream.Message{Headers: eventstream.Headers{
					{Name: ":event-type", Value: eventstream.StringValue(e[0])},
					{Name: ":content-type", Value: eventstream.StringValue("application/json")},
					{Name: ":message-type", Value: eventstream.StringValue("event")},
				}, Payload: []byte(e[1])}
				if err := enc.Encode(w, msg); err != nil {
					t.Error(err)
				}
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, reply)
	}
}
