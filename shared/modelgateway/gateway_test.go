package modelgateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
	"github.com/remote-agents/remote-agents/shared/token"
)

// stored writes a session in state with a sandbox token and returns its id,
// session token and sandbox token.
func stored(t *testing.T, st session.Store, id string, state session.State) (string, string) {
	t.Helper()
	tok, tokHash := token.New(token.Session)
	sb, sbHash := token.New(token.Sandbox)
	now := time.Now().UTC()
	s := session.Session{ID: id, State: state, Generation: 1, TokenHashes: []string{tokHash}, SandboxTokenHash: sbHash, CreatedAt: now, UpdatedAt: now}
	if state.Terminal() {
		s.EndedAt = now
	}
	if err := st.Create(t.Context(), s, nil); err != nil {
		t.Fatal(err)
	}
	return tok, sb
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	st := storetest.NewMemory()
	const (
		id    = "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b01"
		other = "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b02"
		ended = "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b03"
	)
	sessTok, sb := stored(t, st, id, session.Working)
	_, otherSB := stored(t, st, other, session.Ready)
	_, endedSB := stored(t, st, ended, session.Ended)
	model := config.PlatformDefaults().Model
	model.Providers = []string{"anthropic", "openai"}
	gw := modelgateway.New(modelgateway.Options{Store: st, Model: model})
	tests := []struct {
		name, id, tok, provider string
		want                    apierror.Code
	}{
		{"the session's sandbox", id, sb, "anthropic", ""},
		{"no token", id, "", "anthropic", apierror.MissingToken},
		{"the session's own session token", id, sessTok, "anthropic", apierror.Forbidden},
		{"another session's sandbox token", id, otherSB, "anthropic", apierror.InvalidToken},
		{"a session that ended", ended, endedSB, "anthropic", apierror.InvalidToken},
		{"an unknown provider", id, sb, "ollama", apierror.NotFound},
		{"a provider not served", id, sb, "gemini", apierror.Forbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sess, p, err := gw.Authorize(t.Context(), tt.id, tt.tok, tt.provider)
			if apierror.CodeOf(err) != tt.want {
				t.Fatalf("Authorize: %v, want %q", err, tt.want)
			}
			if tt.want == "" && (sess.ID != tt.id || p.Name != tt.provider) {
				t.Errorf("Authorize = %s, %s", sess.ID, p.Name)
			}
		})
	}
}

func TestAllow(t *testing.T) {
	t.Parallel()
	model := config.PlatformDefaults().Model
	model.Allowed = map[string][]string{"bedrock": {"us.anthropic.claude-sonnet-4-5-20250929-v1:0"}}
	gw := modelgateway.New(modelgateway.Options{Store: storetest.NewMemory(), Model: model})
	bedrock, _ := modelgateway.ProviderNamed("bedrock")
	openai, _ := modelgateway.ProviderNamed("openai")
	for _, tt := range []struct {
		call modelgateway.Call
		ok   bool
	}{
		{modelgateway.Call{Provider: bedrock, Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}, true},
		{modelgateway.Call{Provider: bedrock, Model: "us.anthropic.claude-opus-4-5-20251101-v1:0"}, false},
		{modelgateway.Call{Provider: openai, Model: "gpt-5"}, true},
	} {
		if err := gw.Allow(tt.call); (err == nil) != tt.ok || (err != nil && apierror.CodeOf(err) != apierror.Forbidden) {
			t.Errorf("Allow(%s %s) = %v, want ok %v", tt.call.Provider.Name, tt.call.Model, err, tt.ok)
		}
	}
}

func TestUpstream(t *testing.T) {
	t.Parallel()
	model := config.PlatformDefaults().Model
	model.Upstreams = map[string]string{"openai": "http://127.0.0.1:9/v1"}
	gw := modelgateway.New(modelgateway.Options{Store: storetest.NewMemory(), Model: model, Region: "eu-west-1"})
	for provider, want := range map[string]string{
		"openai":    "http://127.0.0.1:9/v1",
		"anthropic": "https://api.anthropic.com",
		"gemini":    "https://generativelanguage.googleapis.com",
		"mistral":   "https://api.mistral.ai/v1",
		"bedrock":   "https://bedrock-runtime.eu-west-1.amazonaws.com",
	} {
		p, _ := modelgateway.ProviderNamed(provider)
		if got := gw.Upstream(p); got != want {
			t.Errorf("%s: %s, want %s", provider, got, want)
		}
	}
}

type failingKeys struct{}

func (failingKeys) Key(context.Context, string) (string, error) {
	return "", errors.New("secrets store down")
}

func TestKeys(t *testing.T) {
	t.Parallel()
	env := modelgateway.EnvKeys(func(name string) (string, bool) {
		v, ok := map[string]string{"GOOGLE_API_KEY": "google-key", "OPENAI_API_KEY": ""}[name]
		return v, ok
	})
	second := modelgateway.EnvKeys(func(name string) (string, bool) { return "second-" + name, name == "OPENAI_API_KEY" })
	keys := modelgateway.FirstKey{env, second}
	for provider, want := range map[string]string{"gemini": "google-key", "openai": "second-OPENAI_API_KEY"} {
		if got, err := keys.Key(t.Context(), provider); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", provider, got, err, want)
		}
	}
	if _, err := keys.Key(t.Context(), "anthropic"); !errors.Is(err, modelgateway.ErrNoKey) {
		t.Errorf("anthropic: %v, want ErrNoKey", err)
	}
	gw := modelgateway.New(modelgateway.Options{Store: storetest.NewMemory(), Model: config.PlatformDefaults().Model, Keys: keys})
	anthropic, _ := modelgateway.ProviderNamed("anthropic")
	if _, err := gw.Key(t.Context(), anthropic); apierror.CodeOf(err) != apierror.ModelUnavailable {
		t.Errorf("no key: %v, want model_unavailable", err)
	}
	down := modelgateway.New(modelgateway.Options{Store: storetest.NewMemory(), Model: config.PlatformDefaults().Model, Keys: modelgateway.FirstKey{failingKeys{}, env}})
	if _, err := down.Key(t.Context(), anthropic); err == nil || apierror.CodeOf(err) != "" {
		t.Errorf("keys unreadable: %v, want the store's error", err)
	}
}
