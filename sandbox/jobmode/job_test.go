package jobmode

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/confine"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
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

// TestJobTools: a job gets its profile's workspace tools, the web tools only
// with network, and bash without network only where it runs in a namespace
// of its own or the launcher vouches for the sandbox's isolation; anywhere
// else the job fails (errIsolation) rather than run without bash. Bash
// runs confined by Landlock, or the job fails.
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
	t.Cleanup(func() { networkIsolation, landlockABI, euid = tools.NetworkIsolation, confine.ABI, os.Geteuid })
	for _, tc := range []struct {
		name      string
		network   bool
		spec      []string
		isolation func() error
		isolated  bool
		want      []string
		noNetwork bool
		refused   bool
	}{
		{"network", true, nil, cannot, false, []string{"read", "write", "bash", "web_fetch", "web_search"}, false, false},
		{"no network, a namespace", false, nil, can, false, []string{"read", "write", "bash"}, true, false},
		{"no network, no namespace", false, nil, cannot, false, nil, false, true},
		{"no network, no namespace, no bash", false, []string{"read"}, cannot, false, []string{"read"}, false, false},
		{"no network, the launcher's isolation", false, nil, cannot, true, []string{"read", "write", "bash"}, false, false},
		{"the spec's tools", true, []string{"read", "web_fetch"}, can, false, []string{"read", "web_fetch"}, false, false},
	} {
		networkIsolation = tc.isolation
		j.spec.Network = tc.network
		got, noNetwork, err := j.enabledTools(tc.spec, Config{NetworkIsolated: tc.isolated})
		if !slices.Equal(got, tc.want) || noNetwork != tc.noNetwork || errors.Is(err, errIsolation) != tc.refused {
			t.Errorf("%s: %v %v %v, want %v %v refused %v", tc.name, got, noNetwork, err, tc.want, tc.noNetwork, tc.refused)
		}
	}
	// Without Landlock, bash is confined by ownership only on a machine of
	// its own, by a root agent, as a tools' user that is not root.
	j.tools = []string{"read", "bash"}
	landlockABI = func() (int, error) { return 0, errors.New("ENOSYS") }
	nobody := &toolenv.User{Name: "agent", UID: 10001, GID: 10001}
	for _, tc := range []struct {
		name      string
		dedicated bool
		uid       int
		tools     *toolenv.User
		ok        bool
	}{
		{"a Fargate task", true, 0, nobody, true},
		{"not dedicated", false, 0, nobody, false},
		{"the agent not root", true, 1000, nobody, false},
		{"the tools as the agent", true, 0, nil, false},
		{"the tools as root", true, 0, &toolenv.User{Name: "root"}, false},
	} {
		euid = func() int { return tc.uid }
		j.r.sb.ToolUser = tc.tools
		r, err := j.confinement(Config{Dedicated: tc.dedicated})
		if r != nil || (err == nil) != tc.ok || (err != nil && (!errors.Is(err, errIsolation) || !strings.Contains(err.Error(), "no Landlock"))) {
			t.Errorf("bash without Landlock, %s: %v %v, want allowed %v", tc.name, r, err, tc.ok)
		}
	}
	j.r.sb.ToolUser = nil
	landlockABI = func() (int, error) { return 1, nil }
	if r, err := j.confinement(Config{}); err != nil || r == nil || len(r.Write) != 2 {
		t.Errorf("bash with Landlock: %+v %v", r, err)
	}
	j.tools = []string{"read"}
	landlockABI = func() (int, error) { return 0, errors.New("ENOSYS") }
	if r, err := j.confinement(Config{}); r != nil || err != nil {
		t.Errorf("no bash, no Landlock: %v %v, want nothing to confine", r, err)
	}
}
