package modelgateway_test

import (
	"encoding/json"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, provider, path, body string
		// wantPath and wantModel, or wantCode for a refusal.
		wantPath, wantModel string
		wantCode            apierror.Code
	}{
		{name: "anthropic messages", provider: "anthropic", path: "v1/messages", body: `{"model":"claude-sonnet-4-5","max_tokens":5}`,
			wantPath: "v1/messages", wantModel: "claude-sonnet-4-5"},
		{name: "anthropic other API", provider: "anthropic", path: "v1/files", body: `{}`, wantCode: apierror.NotFound},
		{name: "anthropic batches", provider: "anthropic", path: "v1/messages/batches", body: `{"model":"x"}`, wantCode: apierror.NotFound},
		{name: "anthropic without a model", provider: "anthropic", path: "v1/messages", body: `{"max_tokens":5}`, wantCode: apierror.InvalidRequest},
		{name: "anthropic body not JSON", provider: "anthropic", path: "v1/messages", body: `model=x`, wantCode: apierror.InvalidRequest},
		{name: "openai chat", provider: "openai", path: "chat/completions", body: `{"model":"gpt-5","messages":[]}`,
			wantPath: "chat/completions", wantModel: "gpt-5"},
		{name: "openai files", provider: "openai", path: "files", body: `{}`, wantCode: apierror.NotFound},
		{name: "openai escaped path", provider: "openai", path: "chat%2Fcompletions", body: `{"model":"gpt-5"}`, wantCode: apierror.NotFound},
		{name: "mistral chat", provider: "mistral", path: "/chat/completions/", body: `{"model":"mistral-large-latest"}`,
			wantPath: "chat/completions", wantModel: "mistral-large-latest"},
		{name: "gemini generate", provider: "gemini", path: "v1beta/models/gemini-2.5-pro:generateContent", body: `{}`,
			wantPath: "v1beta/models/gemini-2.5-pro:generateContent", wantModel: "gemini-2.5-pro"},
		{name: "gemini stream", provider: "gemini", path: "v1/models/gemini-2.5-flash:streamGenerateContent", body: `{}`,
			wantPath: "v1/models/gemini-2.5-flash:streamGenerateContent", wantModel: "gemini-2.5-flash"},
		{name: "gemini escaped colon", provider: "gemini", path: "v1beta/models/gemini-2.5-pro%3AgenerateContent", body: `{}`,
			wantPath: "v1beta/models/gemini-2.5-pro:generateContent", wantModel: "gemini-2.5-pro"},
		{name: "gemini tuned models", provider: "gemini", path: "v1beta/tunedModels", body: `{}`, wantCode: apierror.NotFound},
		{name: "gemini file upload", provider: "gemini", path: "upload/v1beta/files", body: `{}`, wantCode: apierror.NotFound},
		{name: "bedrock converse", provider: "bedrock", path: "model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/converse", body: `{}`,
			wantPath: "model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse", wantModel: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{name: "bedrock converse, escaped", provider: "bedrock", path: "model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream", body: `{}`,
			wantPath: "model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream", wantModel: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{name: "bedrock profile ARN, escaped", provider: "bedrock",
			path: "model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-v1%3A0/invoke", body: `{}`,
			wantPath:  "model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-v1%3A0/invoke",
			wantModel: "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-v1:0"},
		{name: "bedrock profile ARN, not escaped", provider: "bedrock",
			path: "model/arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-v1:0/invoke-with-response-stream", body: `{}`,
			wantPath:  "model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-v1%3A0/invoke-with-response-stream",
			wantModel: "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-v1:0"},
		{name: "bedrock guardrails", provider: "bedrock", path: "guardrail/g1/version/1/apply", body: `{}`, wantCode: apierror.NotFound},
		{name: "bedrock async invoke", provider: "bedrock", path: "async-invoke", body: `{}`, wantCode: apierror.NotFound},
		{name: "bedrock no model", provider: "bedrock", path: "model/converse", body: `{}`, wantCode: apierror.NotFound},
		{name: "bad escape", provider: "openai", path: "chat/%zz", body: `{}`, wantCode: apierror.NotFound},
		{name: "empty segment", provider: "openai", path: "chat//completions", body: `{}`, wantCode: apierror.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := modelgateway.ProviderNamed(tt.provider)
			if !ok {
				t.Fatalf("no provider %s", tt.provider)
			}
			c, err := p.Parse(tt.path, []byte(tt.body))
			if tt.wantCode != "" {
				if apierror.CodeOf(err) != tt.wantCode {
					t.Errorf("Parse = %+v, %v; want %s", c, err, tt.wantCode)
				}
				return
			}
			if err != nil || c.Path != tt.wantPath || c.Model != tt.wantModel || string(c.Body) != tt.body || c.Provider.Name != tt.provider {
				t.Errorf("Parse = %q %q %s, %v; want %q %q", c.Path, c.Model, c.Body, err, tt.wantPath, tt.wantModel)
			}
		})
	}
}

// An OpenAI stream is asked to report its usage (one more chunk, without
// choices, at its end), keeping what the sandbox sent; Mistral's, which
// refuses stream_options and reports usage unasked, is not.
func TestOpenAIStreamsReportUsage(t *testing.T) {
	t.Parallel()
	openai, _ := modelgateway.ProviderNamed("openai")
	mistral, _ := modelgateway.ProviderNamed("mistral")
	tests := []struct {
		name string
		p    modelgateway.Provider
		body string
		want map[string]any // the body sent; nil: as it came
	}{
		{"stream without options", openai, `{"model":"gpt-5","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			map[string]any{"model": "gpt-5", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}},
				"stream_options": map[string]any{"include_usage": true}}},
		{"stream with other options", openai, `{"model":"gpt-5","stream":true,"stream_options":{"include_obfuscation":false}}`,
			map[string]any{"model": "gpt-5", "stream": true, "stream_options": map[string]any{"include_obfuscation": false, "include_usage": true}}},
		{"stream refusing usage", openai, `{"model":"gpt-5","stream":true,"stream_options":{"include_usage":false}}`,
			map[string]any{"model": "gpt-5", "stream": true, "stream_options": map[string]any{"include_usage": true}}},
		{"stream asking usage", openai, `{"model":"gpt-5","stream":true,"stream_options":{"include_usage":true}}`, nil},
		{"no stream", openai, `{"model":"gpt-5","stream":false}`, nil},
		{"mistral stream", mistral, `{"model":"mistral-large-latest","stream":true}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.p.Parse("chat/completions", []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if string(c.Body) != tt.body {
					t.Errorf("body %s, want it unchanged", c.Body)
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(c.Body, &got); err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tt.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("body %s, want %s", gotJSON, wantJSON)
			}
		})
	}
}
