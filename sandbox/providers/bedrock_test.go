package providers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/providers/providertest"
)

func TestBedrockContract(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Bedrock(t), func(o providers.Options) llm.Provider {
		cfg := aws.Config{
			Region:       "us-east-1",
			Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
			BaseEndpoint: aws.String(o.BaseURL),
		}
		o.Model = "claude-sonnet-4.5"
		return providers.NewBedrock(cfg, o)
	})
}

// TestBedrockBearerToken: with an API key, Bedrock calls carry it as a
// bearer token instead of a SigV4 signature, over plain HTTP too (the model
// gateway on a developer's machine), to an endpoint with a path.
func TestBedrockBearerToken(t *testing.T) {
	t.Parallel()
	type seen struct{ path, auth, date string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get("X-Amz-Date")}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4}}`)
	}))
	t.Cleanup(srv.Close)
	p, err := providers.New(agentconfig.LLM{Provider: "bedrock", Model: "claude-sonnet-4.5", APIKey: "rsb_token", BaseURL: srv.URL + "/sandbox/s1/model/bedrock", TimeoutSeconds: 5}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}})
	if err != nil || res.Content != "ok" || res.Usage != (llm.Usage{InputTokens: 3, OutputTokens: 1}) {
		t.Fatalf("%+v, %v", res, err)
	}
	s := <-got
	if s.auth != "Bearer rsb_token" || s.date != "" || s.path != "/sandbox/s1/model/bedrock/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse" {
		t.Errorf("request %+v", s)
	}
}
