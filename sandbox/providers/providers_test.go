package providers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
)

func TestNew(t *testing.T) {
	warm := 0.7
	tests := []struct {
		cfg  agentconfig.LLM
		name string
		err  string
	}{
		{agentconfig.LLM{Provider: "scripted"}, "scripted", ""},
		{agentconfig.LLM{Provider: "anthropic", APIKey: "k", TimeoutSeconds: 10}, "anthropic", ""},
		{agentconfig.LLM{Provider: "anthropic", APIKeyEnv: "MY_KEY"}, "", "needs an API key in $MY_KEY"},
		{agentconfig.LLM{Provider: "anthropic", APIKey: "k", Temperature: &warm}, "", "llm.temperature: anthropic takes none"},
		{agentconfig.LLM{Provider: "openai"}, "", "needs an API key in $OPENAI_API_KEY"},
		{agentconfig.LLM{Provider: "openai", APIKey: "k", Temperature: &warm}, "openai", ""},
		{agentconfig.LLM{Provider: "gemini"}, "", "needs an API key in $GEMINI_API_KEY or $GOOGLE_API_KEY"},
		{agentconfig.LLM{Provider: "gemini", APIKey: "k", Temperature: &warm}, "gemini", ""},
		{agentconfig.LLM{Provider: "mistral"}, "", "needs an API key in $MISTRAL_API_KEY"},
		{agentconfig.LLM{Provider: "mistral", APIKey: "k", Temperature: &warm}, "mistral", ""},
		{agentconfig.LLM{Provider: "ollama", Model: "llama3.2"}, "ollama", ""},
		{agentconfig.LLM{Provider: "ollama"}, "", "needs llm.model ($RA_LLM_MODEL)"},
		{agentconfig.LLM{Provider: "openai-compatible", Model: "qwen3"}, "", "needs the server's address in llm.base_url"},
		{agentconfig.LLM{Provider: "openai-compatible", Model: "qwen3", BaseURL: "http://localhost:8000/v1"}, "openai-compatible", ""},
		{agentconfig.LLM{Provider: "vertex"}, "", "not available in this build of the agent (available: scripted, anthropic, openai, bedrock, gemini, mistral, ollama, openai-compatible)"},
		{agentconfig.LLM{Provider: "bedrock", Model: "claude-sonnet-4.5"}, "bedrock", ""},
		{agentconfig.LLM{Provider: "scripted", Script: "missing.jsonl"}, "", "load script"},
	}
	for _, tt := range tests {
		p, err := providers.New(tt.cfg, t.TempDir())
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.err)
			}
			continue
		}
		if err != nil || p.Name() != tt.name {
			t.Errorf("%+v: %v, %v", tt.cfg, p, err)
		}
	}
	if got := providers.ProviderModelID("bedrock", "claude-sonnet-4.5"); !strings.Contains(got, "anthropic.claude-sonnet-4-5") {
		t.Errorf("bedrock id %q", got)
	}
	if got := providers.ProviderModelID("anthropic", "my-own-model"); got != "my-own-model" {
		t.Errorf("unknown id rewritten to %q", got)
	}
	if got := providers.ProviderModelID("mistral", "mistral-large"); got != "mistral-large-latest" {
		t.Errorf("mistral id %q", got)
	}
	if got := providers.ProviderModelID("ollama", "claude-sonnet-4.5"); got != "claude-sonnet-4.5" {
		t.Errorf("a local server's model rewritten to %q", got)
	}
	// Every provider but the local servers and the scripted one has a default
	// model.
	for _, name := range agentconfig.Providers() {
		model := providers.DefaultModel(name)
		switch name {
		case "scripted", "ollama", "openai-compatible":
			if model != "" {
				t.Errorf("%s has default model %q", name, model)
			}
		default:
			if model == "" {
				t.Errorf("%s has no default model", name)
			}
		}
	}
}

// TestNewUsesTheDefaultModel checks that a hosted provider without llm.model
// asks for its default model rather than for none.
func TestNewUsesTheDefaultModel(t *testing.T) {
	models := make(chan any, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		models <- body["model"]
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	}))
	t.Cleanup(srv.Close)
	p, err := providers.New(agentconfig.LLM{Provider: "mistral", APIKey: "k", BaseURL: srv.URL, TimeoutSeconds: 5}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if got := <-models; got != "mistral-large-latest" {
		t.Errorf("model %v, want mistral-large-latest", got)
	}
}

// TestNewCarriesTheSettings checks that the configuration's model, max tokens
// and temperature reach the request a provider New built sends.
func TestNewCarriesTheSettings(t *testing.T) {
	bodies := make(chan map[string]any, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		bodies <- body
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"gpt-5","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
	}))
	t.Cleanup(srv.Close)
	warm := 0.7
	p, err := providers.New(agentconfig.LLM{Provider: "openai", APIKey: "k", BaseURL: srv.URL, Model: "gpt-5", MaxTokens: 300, Temperature: &warm, TimeoutSeconds: 5}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}})
	if err != nil || res.Usage != (llm.Usage{InputTokens: 3, OutputTokens: 1}) {
		t.Fatalf("%+v, %v", res, err)
	}
	body := <-bodies
	if body["model"] != "gpt-5" || body["max_completion_tokens"] != float64(300) || body["temperature"] != 0.7 {
		t.Errorf("request %v: want model gpt-5, max_completion_tokens 300, temperature 0.7", body)
	}
}

// TestRateLimitedIsTheLastAnswers429: whatever SDK made the call, a model
// call whose last answer (after the transport's retries) was 429 is rate
// limited; one that ended on a 5xx is not.
func TestRateLimitedIsTheLastAnswers429(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"anthropic": `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
		"openai":    `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`,
		"gemini":    `{"error":{"code":%d,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`,
	}
	for provider, body := range bodies {
		for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(status)
				if strings.Contains(body, "%d") {
					_, _ = fmt.Fprintf(w, body, status)
				} else {
					_, _ = io.WriteString(w, body)
				}
			}))
			p, err := providers.New(agentconfig.LLM{Provider: provider, APIKey: "k", Model: "m", BaseURL: srv.URL, TimeoutSeconds: 10}, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}})
			srv.Close()
			if err == nil || providers.RateLimited(err) != (status == http.StatusTooManyRequests) {
				t.Errorf("%s answering %d: error %v, rate limited %v", provider, status, err, providers.RateLimited(err))
			}
		}
	}
}
