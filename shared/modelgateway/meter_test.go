package modelgateway_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/session"
)

// sse joins events into a Server-Sent Events stream (lines end with eol).
func sse(eol string, events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(strings.ReplaceAll(e, "\n", eol) + eol + eol)
	}
	return b.String()
}

// awsEvents encodes events ({event type, payload}) as an AWS event stream.
func awsEvents(t testing.TB, events ...[2]string) string {
	t.Helper()
	var b bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, e := range events {
		msg := eventstream.Message{Headers: eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue(e[0])},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("event")},
			{Name: "x-flag", Value: eventstream.BoolValue(true)},
			{Name: "x-int", Value: eventstream.Int32Value(7)},
		}, Payload: []byte(e[1])}
		if err := enc.Encode(&b, msg); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

type meterCase struct {
	name, provider, contentType string
	header                      http.Header
	body                        string
	want                        session.Usage
	reported                    bool
}

func meterCases(t testing.TB) []meterCase {
	const (
		sseType = "text/event-stream; charset=utf-8"
		jsonT   = "application/json"
		awsT    = "application/vnd.amazon.eventstream"
	)
	u := func(in, out, cached int64) session.Usage {
		return session.Usage{InputTokens: in, OutputTokens: out, CachedTokens: cached, Calls: 1}
	}
	chunk := func(inner string) string {
		return `{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(inner)) + `"}`
	}
	return []meterCase{
		{name: "anthropic message", provider: "anthropic", contentType: jsonT,
			body: `{"id":"msg_1","type":"message","content":[{"type":"text","text":"usage?"}],"usage":{"input_tokens":12,"output_tokens":4}}`,
			want: u(12, 4, 0), reported: true},
		{name: "anthropic message with cache", provider: "anthropic", contentType: jsonT,
			body: `{"type":"message","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":4}}`,
			want: u(1110, 4, 1000), reported: true},
		{name: "anthropic stream", provider: "anthropic", contentType: sseType, body: sse("\n",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":3,\"output_tokens\":1}}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the usage was {\\\"usage\\\":{\\\"output_tokens\\\":999}}\"}}",
			"event: ping\ndata: {\"type\": \"ping\"}",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":4}}",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}"),
			want: u(15, 4, 3), reported: true},
		{name: "openai completion", provider: "openai", contentType: jsonT,
			body: `{"id":"c1","object":"chat.completion","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":8}}}`,
			want: u(12, 4, 8), reported: true},
		{name: "openai stream, usage chunk", provider: "openai", contentType: sseType, body: sse("\n",
			`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hello "}}],"usage":null}`,
			`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
			`data: {"id":"c1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`,
			`data: [DONE]`),
			want: u(12, 4, 0), reported: true},
		{name: "mistral stream, usage in the last chunk", provider: "mistral", contentType: "text/event-stream", body: sse("\n",
			`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
			`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`,
			`data: [DONE]`),
			want: u(7, 2, 0), reported: true},
		{name: "gemini answer, thinking is output", provider: "gemini", contentType: jsonT,
			body: `{"candidates":[],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3,"thoughtsTokenCount":1,"cachedContentTokenCount":5,"totalTokenCount":16}}`,
			want: u(12, 4, 5), reported: true},
		{name: "gemini stream, CRLF, running totals", provider: "gemini", contentType: sseType, body: sse("\r\n",
			`data: {"candidates":[{"content":{"parts":[{"text":"Hello "}]}}],"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12}}`,
			`data: {"candidates":[{"content":{"parts":[{"text":"there."}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":4,"totalTokenCount":16}}`),
			want: u(12, 4, 0), reported: true},
		{name: "gemini stream without alt=sse", provider: "gemini", contentType: jsonT,
			body: `[{"usageMetadata":{"promptTokenCount":12}},{"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":4,"toolUsePromptTokenCount":2}}]`,
			want: u(14, 4, 0), reported: true},
		{name: "bedrock converse", provider: "bedrock", contentType: jsonT,
			body: `{"output":{"message":{"role":"assistant","content":[{"text":"Hello there."}]}},"usage":{"inputTokens":12,"outputTokens":4,"cacheReadInputTokens":20,"cacheWriteInputTokens":2,"totalTokens":38}}`,
			want: u(34, 4, 20), reported: true},
		{name: "bedrock converse stream", provider: "bedrock", contentType: awsT, body: awsEvents(t,
			[2]string{"messageStart", `{"role":"assistant"}`},
			[2]string{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"usage"}}`},
			[2]string{"messageStop", `{"stopReason":"end_turn"}`},
			[2]string{"metadata", `{"usage":{"inputTokens":12,"outputTokens":4,"totalTokens":16},"metrics":{"latencyMs":3}}`}),
			want: u(12, 4, 0), reported: true},
		{name: "bedrock invoke stream", provider: "bedrock", contentType: awsT, body: awsEvents(t,
			[2]string{"chunk", chunk(`{"type":"message_start","message":{"usage":{"input_tokens":12,"output_tokens":1}}}`)},
			[2]string{"chunk", chunk(`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":12,"outputTokenCount":4,"invocationLatency":3}}`)}),
			want: u(12, 4, 0), reported: true},
		{name: "bedrock invoke, usage in headers", provider: "bedrock", contentType: jsonT,
			header: http.Header{"X-Amzn-Bedrock-Input-Token-Count": {"12"}, "X-Amzn-Bedrock-Output-Token-Count": {"4"}},
			body:   `{"content":[{"type":"text","text":"Hello"}]}`,
			want:   u(12, 4, 0), reported: true},
		{name: "no usage", provider: "openai", contentType: jsonT, body: `{"id":"c1","choices":[]}`, want: u(0, 0, 0)},
		{name: "not JSON", provider: "anthropic", contentType: jsonT, body: `<html>usage</html>`, want: u(0, 0, 0)},
		{name: "stream cut short", provider: "anthropic", contentType: sseType,
			body: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_bl",
			want: u(12, 1, 0), reported: true},
		{name: "stream without a last blank line", provider: "openai", contentType: sseType,
			body: `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`, want: u(3, 1, 0), reported: true},
		{name: "negative counts count as none", provider: "openai", contentType: jsonT,
			body: `{"usage":{"prompt_tokens":-5,"completion_tokens":2}}`, want: u(0, 2, 0), reported: true},
		{name: "broken event stream", provider: "bedrock", contentType: awsT, body: "\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00", want: u(0, 0, 0)},
	}
}

// TestMeter reads each provider's answers, whole and as they arrive in
// pieces (every split point), into the usage they report.
func TestMeter(t *testing.T) {
	t.Parallel()
	for _, tt := range meterCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := modelgateway.ProviderNamed(tt.provider)
			read := func(parts ...string) (session.Usage, bool) {
				m := modelgateway.NewMeter(p, tt.contentType, tt.header.Get)
				for _, part := range parts {
					if n, err := m.Write([]byte(part)); n != len(part) || err != nil {
						t.Fatalf("Write = %d, %v", n, err)
					}
				}
				return m.Usage()
			}
			if got, ok := read(tt.body); got != tt.want || ok != tt.reported {
				t.Errorf("whole: %+v, %v; want %+v, %v", got, ok, tt.want, tt.reported)
			}
			for i := 1; i < len(tt.body); i++ {
				if got, ok := read(tt.body[:i], tt.body[i:]); got != tt.want || ok != tt.reported {
					t.Fatalf("split at %d: %+v, %v; want %+v", i, got, ok, tt.want)
				}
			}
			bytewise := make([]string, len(tt.body))
			for i := range tt.body {
				bytewise[i] = tt.body[i : i+1]
			}
			if got, _ := read(bytewise...); got != tt.want {
				t.Errorf("byte by byte: %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMeterBoundsWhatItHolds: a JSON answer past MaxMeteredJSON is passed on
// unread (no usage), not held.
func TestMeterBoundsWhatItHolds(t *testing.T) {
	t.Parallel()
	p, _ := modelgateway.ProviderNamed("openai")
	m := modelgateway.NewMeter(p, "application/json", nil)
	big := `{"usage":{"prompt_tokens":1,"completion_tokens":1},"pad":"` + strings.Repeat("x", modelgateway.MaxMeteredJSON) + `"}`
	_, _ = m.Write([]byte(big))
	if u, ok := m.Usage(); ok || u.InputTokens != 0 || u.Calls != 1 {
		t.Errorf("usage of an answer past the bound: %+v, %v", u, ok)
	}
	s := modelgateway.NewMeter(p, "text/event-stream", nil)
	_, _ = s.Write([]byte("data: " + strings.Repeat("x", 2<<20) + "\n\n"))
	_, _ = s.Write([]byte(`data: {"usage":{"prompt_tokens":3,"completion_tokens":1}}` + "\n\n"))
	if u, ok := s.Usage(); !ok || u.InputTokens != 3 {
		t.Errorf("usage after an event past the bound: %+v, %v", u, ok)
	}
}

func FuzzMeter(f *testing.F) {
	for _, c := range meterCases(f) {
		f.Add(c.provider, c.contentType, c.body, uint16(len(c.body)/2))
	}
	f.Fuzz(func(t *testing.T, provider, contentType, body string, split uint16) {
		p, ok := modelgateway.ProviderNamed(provider)
		if !ok {
			return
		}
		whole := modelgateway.NewMeter(p, contentType, nil)
		_, _ = whole.Write([]byte(body))
		want, wantOK := whole.Usage()
		i := min(int(split), len(body))
		parts := modelgateway.NewMeter(p, contentType, nil)
		_, _ = parts.Write([]byte(body[:i]))
		_, _ = parts.Write([]byte(body[i:]))
		got, gotOK := parts.Usage()
		if got != want || gotOK != wantOK || got.InputTokens < 0 || got.OutputTokens < 0 || got.Calls != 1 {
			t.Errorf("split at %d: %+v %v; whole: %+v %v", i, got, gotOK, want, wantOK)
		}
	})
}
