package jobmode

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/tools"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// TestJobLLM: a job's model is its profile's: a hosted provider through the
// session's model route with the sandbox token, whatever the sandbox's own
// model; the profile's model, max tokens and temperature (none to
// Anthropic); "local" the local server configured; scripted with the
// sandbox's script.
func TestJobLLM(t *testing.T) {
	r := &Runner{sb: Sandbox{SessionID: "s1", ModelGateway: "http://models", Token: "rsb_tok",
		LLM: agentconfig.LLM{Provider: "openai-compatible", BaseURL: "http://vllm:8000/v1", Script: "job.jsonl", APIKey: "local-key"}}}
	profile := func(provider string) sandboxwire.JobProfile {
		return sandboxwire.JobProfile{Provider: provider, Model: "m1", MaxTokens: 777, Temperature: 0.3}
	}
	for _, tc := range []struct {
		provider, wantProvider, wantBase, wantKey, wantScript string
		wantTemperature                                       bool
	}{
		{"openai", "openai", "http://models/sandbox/s1/model/openai", "rsb_tok", "", true},
		{"mistral", "mistral", "http://models/sandbox/s1/model/mistral", "rsb_tok", "", true},
		{"bedrock", "bedrock", "http://models/sandbox/s1/model/bedrock", "rsb_tok", "", true},
		{"anthropic", "anthropic", "http://models/sandbox/s1/model/anthropic", "rsb_tok", "", false},
		{"local", "openai-compatible", "http://vllm:8000/v1", "local-key", "", true},
		{"scripted", "scripted", "", "", "job.jsonl", true},
	} {
		l, err := r.jobLLM(profile(tc.provider))
		if err != nil {
			t.Fatalf("%s: %v", tc.provider, err)
		}
		if l.Provider != tc.wantProvider || l.BaseURL != tc.wantBase || l.APIKey != tc.wantKey || l.Script != tc.wantScript ||
			l.Model != "m1" || l.MaxTokens != 777 || l.TimeoutSeconds != 300 || (l.Temperature != nil) != tc.wantTemperature ||
			(l.Temperature != nil && *l.Temperature != 0.3) {
			t.Errorf("%s: %+v", tc.provider, l)
		}
	}
	if _, err := r.jobLLM(profile("vertex")); err == nil || !strings.Contains(err.Error(), "not available") {
		t.Errorf("an unknown provider: %v", err)
	}
	r.sb.LLM = agentconfig.LLM{}
	if l, _ := r.jobLLM(profile("local")); l.Provider != "ollama" {
		t.Errorf("local without a configured server: %+v", l)
	}
}

// TestJobTools: a job's tools are its profile's skills that exist (and that
// the spec lists), without the web tools when it has no network; bash runs
// without network, or is not offered where that cannot be had and the
// launcher does not vouch for the isolation.
func TestJobTools(t *testing.T) {
	dir := t.TempDir()
	log, err := openJobLog(dir, func(s string) string { return s })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.close() }()
	skills := []string{"read", "write", "bash", "web_fetch", "web_search", "no_such_tool", "verify", "my-agentfile"}
	j := &jobRun{r: &Runner{sb: Sandbox{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}, log: log,
		spec: &sandboxwire.JobSpec{Profile: sandboxwire.JobProfile{AllowedSkills: skills}}}
	can := func() error { return nil }
	cannot := func() error { return errors.New("EPERM") }
	for _, tc := range []struct {
		name      string
		network   bool
		spec      []string
		isolation func() error
		isolated  bool
		want      []string
		noNetwork bool
	}{
		{"network", true, nil, cannot, false, []string{"read", "write", "bash", "web_fetch", "web_search"}, false},
		{"no network, a namespace", false, nil, can, false, []string{"read", "write", "bash"}, true},
		{"no network, no namespace", false, nil, cannot, false, []string{"read", "write"}, false},
		{"no network, the launcher's isolation", false, nil, cannot, true, []string{"read", "write", "bash"}, false},
		{"the spec's tools", true, []string{"read", "web_fetch"}, can, false, []string{"read", "web_fetch"}, false},
	} {
		networkIsolation = tc.isolation
		j.spec.Network = tc.network
		got, noNetwork := j.enabledTools(tc.spec, Config{NetworkIsolated: tc.isolated})
		if !slices.Equal(got, tc.want) || noNetwork != tc.noNetwork {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, noNetwork, tc.want, tc.noNetwork)
		}
	}
	networkIsolation = tools.NetworkIsolation
}
