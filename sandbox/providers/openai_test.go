package providers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/providers/providertest"
)

func TestOpenAIContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.OpenAI(t), func(o providers.Options) llm.Provider {
		o.APIKey, o.Model = "test-key", "claude-sonnet-4.5"
		return providers.NewOpenAI(o)
	})
}

func TestMistralContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Mistral(t), func(o providers.Options) llm.Provider {
		o.BaseURL += "/v1"
		o.APIKey, o.Model = "mistral-key", "mistral-large"
		return providers.NewMistral(o)
	})
}

func TestOllamaContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Local(t), func(o providers.Options) llm.Provider {
		o.BaseURL += "/v1"
		o.Model = "llama3.2"
		return providers.NewOpenAICompatible("ollama", o)
	})
}

func TestOpenAICompatibleContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Local(t), func(o providers.Options) llm.Provider {
		o.BaseURL += "/v1"
		o.Model = "llama3.2"
		return providers.NewOpenAICompatible("openai-compatible", o)
	})
}

// TestOpenAIVariablesStayWithOpenAI checks that what the OpenAI SDK reads from
// the environment (OPENAI_API_KEY, OPENAI_ORG_ID, OPENAI_PROJECT_ID,
// OPENAI_BASE_URL) reaches neither Mistral nor a local server, each built by
// New as configured.
func TestOpenAIVariablesStayWithOpenAI(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-openai-secret")
	t.Setenv("OPENAI_ORG_ID", "org-1")
	t.Setenv("OPENAI_PROJECT_ID", "proj-1")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1") // nothing listens there
	tests := []struct {
		cfg  agentconfig.LLM
		auth string
	}{
		{agentconfig.LLM{Provider: "ollama", Model: "llama3.2"}, ""},
		{agentconfig.LLM{Provider: "openai-compatible", Model: "llama3.2"}, ""},
		{agentconfig.LLM{Provider: "openai-compatible", Model: "llama3.2", APIKey: "vllm-key"}, "Bearer vllm-key"},
		{agentconfig.LLM{Provider: "mistral", APIKey: "mistral-key"}, "Bearer mistral-key"},
	}
	for _, tt := range tests {
		t.Run(tt.cfg.Provider+" "+tt.auth, func(t *testing.T) {
			headers := make(chan http.Header, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				headers <- r.Header.Clone()
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
			}))
			t.Cleanup(srv.Close)
			cfg := tt.cfg
			cfg.BaseURL, cfg.TimeoutSeconds = srv.URL+"/v1", 5
			p, err := providers.New(cfg, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}})
			if err != nil || res.Content != "ok" || p.Name() != cfg.Provider {
				t.Fatalf("%s: %+v, %v", p.Name(), res, err)
			}
			h := <-headers
			if h.Get("Authorization") != tt.auth || h.Get("OpenAI-Organization") != "" || h.Get("OpenAI-Project") != "" {
				t.Errorf("sent Authorization %q (want %q), organization %q, project %q",
					h.Get("Authorization"), tt.auth, h.Get("OpenAI-Organization"), h.Get("OpenAI-Project"))
			}
		})
	}
}
