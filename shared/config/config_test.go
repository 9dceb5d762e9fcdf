package config_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsWithoutFileOrEnv(t *testing.T) {
	t.Parallel()
	c, err := config.Parse("config.yaml", nil, env())
	if err != nil {
		t.Fatal(err)
	}
	want := config.RemoteAgents{AllowedOrigins: []string{}, CreationTimeout: 15 * time.Second, CheckpointInterval: 10 * time.Minute, GuardrailsPath: "data/platform-guardrails.md",
		WorkspaceDefaults: config.WorkspaceLimits{CPU: "1", Memory: "2G", Disk: "20G"}, GitInsecureHosts: []string{"127.0.0.1", "localhost", "::1"},
		Quotas: config.DefaultQuotas, SessionLimits: config.DefaultSessionLimits}
	if !reflect.DeepEqual(c.RemoteAgents, want) {
		t.Errorf("defaults = %+v, want %+v", c, want)
	}
}

// git_insecure_hosts: loopback by default; the file's list, then the
// variable's, replace it (empty: none); a list entry that is no host is an
// error naming the key.
func TestGitInsecureHosts(t *testing.T) {
	t.Parallel()
	c, err := config.Parse("config.yaml", []byte("remote_agents:\n  git_insecure_hosts: [git.internal, 10.0.0.5]\n"), env())
	if err != nil || !reflect.DeepEqual(c.GitInsecureHosts, []string{"git.internal", "10.0.0.5"}) {
		t.Errorf("file: %v %v", c.GitInsecureHosts, err)
	}
	c, err = config.Parse("config.yaml", []byte("remote_agents:\n  git_insecure_hosts: [git.internal]\n"), env("RA_GIT_INSECURE_HOSTS", "Mirror.Local, 127.0.0.1"))
	if err != nil || !reflect.DeepEqual(c.GitInsecureHosts, []string{"mirror.local", "127.0.0.1"}) {
		t.Errorf("variable over file: %v %v", c.GitInsecureHosts, err)
	}
	c, err = config.Parse("config.yaml", nil, env("RA_GIT_INSECURE_HOSTS", ""))
	if err != nil || len(c.GitInsecureHosts) != 0 {
		t.Errorf("empty variable: %v %v", c.GitInsecureHosts, err)
	}
	for _, bad := range []string{"http://host", "host/path", "-oProxy", "a b"} {
		if _, err := config.Parse("config.yaml", nil, env("RA_GIT_INSECURE_HOSTS", bad)); err == nil || !strings.Contains(err.Error(), "RA_GIT_INSECURE_HOSTS") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := config.Parse("config.yaml", []byte("remote_agents:\n  git_insecure_hosts: [\"file:\"]\n"), env()); err == nil || !strings.Contains(err.Error(), "remote_agents.git_insecure_hosts") {
		t.Errorf("file entry: %v", err)
	}
}

func TestFileThenEnvironment(t *testing.T) {
	t.Parallel()
	file := []byte(`
server:
  port: 9000
remote_agents:
  allowed_origins: ["https://app.example.com/", "http://localhost:3000"]
  embed_features:
    file_upload: true
    voice_mic: false
  creation_timeout_seconds: 20
  public_base_url: https://agents.example.com
`)
	c, err := config.Parse("config.yaml", file, env())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.AllowedOrigins, []string{"https://app.example.com", "http://localhost:3000"}) ||
		c.EmbedFeatures != (config.Features{FileUpload: true}) || c.CreationTimeout != 20*time.Second ||
		c.PublicBaseURL != "https://agents.example.com" {
		t.Errorf("from file: %+v", c)
	}
	c, err = config.Parse("config.yaml", file, env(
		"RA_ALLOWED_ORIGINS", "https://a.example, https://b.example",
		"RA_EMBED_FEATURES", "context_usage,voice_mic",
		"RA_CREATION_TIMEOUT_SECONDS", "5",
		"RA_PUBLIC_BASE_URL", "http://127.0.0.1:8080",
		"RA_GUARDRAILS_PATH", "s3://bucket/guardrails.md",
	))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.AllowedOrigins, []string{"https://a.example", "https://b.example"}) ||
		c.EmbedFeatures != (config.Features{ContextUsage: true, VoiceMic: true}) || c.CreationTimeout != 5*time.Second ||
		c.PublicBaseURL != "http://127.0.0.1:8080" || c.GuardrailsPath != "s3://bucket/guardrails.md" {
		t.Errorf("with environment: %+v", c)
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		env  []string
		want string
	}{
		{"unknown key", "remote_agents:\n  creation_timeout: 15\n", nil, "remote_agents.creation_timeout: unknown key"},
		{"wrong type", "remote_agents:\n  creation_timeout_seconds: soon\n", nil, "remote_agents.creation_timeout_seconds: want a whole number"},
		{"negative timeout", "remote_agents:\n  creation_timeout_seconds: -1\n", nil, "remote_agents.creation_timeout_seconds: -1 seconds is outside"},
		{"timeout past API Gateway", "remote_agents:\n  creation_timeout_seconds: 60\n", nil, "outside 1..29"},
		{"origins not a list", "remote_agents:\n  allowed_origins: https://x\n", nil, "remote_agents.allowed_origins: want a list"},
		{"origin with path", "remote_agents:\n  allowed_origins: [\"https://x/app\"]\n", nil, "remote_agents.allowed_origins[0]"},
		{"unknown feature", "remote_agents:\n  embed_features:\n    camera: true\n", nil, "remote_agents.embed_features.camera: unknown feature"},
		{"feature not bool", "remote_agents:\n  embed_features:\n    voice_mic: yes please\n", nil, "remote_agents.embed_features.voice_mic: want true or false"},
		{"base URL", "remote_agents:\n  public_base_url: agents.example.com\n", nil, "remote_agents.public_base_url"},
		{"section not mapping", "remote_agents: 3\n", nil, "remote_agents: want a mapping"},
		{"bad yaml", "remote_agents: [\n", nil, "not valid YAML"},
		{"env timeout", "", []string{"RA_CREATION_TIMEOUT_SECONDS", "abc"}, "RA_CREATION_TIMEOUT_SECONDS"},
		{"env negative", "", []string{"RA_CREATION_TIMEOUT_SECONDS", "-5"}, "RA_CREATION_TIMEOUT_SECONDS: -5 seconds"},
		{"env feature", "", []string{"RA_EMBED_FEATURES", "file_upload,camera"}, `RA_EMBED_FEATURES: unknown feature "camera"`},
		{"env origin", "", []string{"RA_ALLOWED_ORIGINS", "ftp://x"}, "RA_ALLOWED_ORIGINS[0]"},
		{"workspace cpu", "remote_agents:\n  workspace_defaults:\n    cpu: \"3\"\n", nil, "remote_agents.workspace_defaults: cpu must be one of 0.25, 0.5, 1, 2, 4, 8 or 16 vCPUs"},
		{"workspace unknown key", "remote_agents:\n  workspace_defaults:\n    gpu: \"1\"\n", nil, "remote_agents.workspace_defaults.gpu: unknown key"},
		{"workspace memory the cpu cannot have", "", []string{"WORKSPACE_DEFAULT_CPU", "4"}, "WORKSPACE_DEFAULT_CPU, WORKSPACE_DEFAULT_MEMORY, WORKSPACE_DEFAULT_DISK): 4 vCPU takes 8G to 30G in 1G steps of memory, not 2G"},
		{"workspace disk", "", []string{"WORKSPACE_DEFAULT_DISK", "500G"}, "disk must be from 20G to 200G"},
		{"workspace memory", "", []string{"WORKSPACE_DEFAULT_MEMORY", "lots"}, "memory must be a size like 512M or 4G"},
	}
	for _, tt := range tests {
		_, err := config.Parse("config.yaml", []byte(tt.file), env(tt.env...))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

// The workspace defaults come from the file, then WORKSPACE_DEFAULT_*, part
// by part, written as tasksize writes them.
func TestWorkspaceDefaults(t *testing.T) {
	t.Parallel()
	file := []byte("remote_agents:\n  workspace_defaults:\n    cpu: \"2\"\n    memory: 8192Mi\n")
	c, err := config.Parse("config.yaml", file, env())
	if err != nil {
		t.Fatal(err)
	}
	if want := (config.WorkspaceLimits{CPU: "2", Memory: "8G", Disk: "20G"}); c.WorkspaceDefaults != want {
		t.Errorf("from the file: %+v, want %+v", c.WorkspaceDefaults, want)
	}
	c, err = config.Parse("config.yaml", file, env("WORKSPACE_DEFAULT_CPU", "4", "WORKSPACE_DEFAULT_MEMORY", "16G", "WORKSPACE_DEFAULT_DISK", "50GiB"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (config.WorkspaceLimits{CPU: "4", Memory: "16G", Disk: "50G"}); c.WorkspaceDefaults != want {
		t.Errorf("with the environment: %+v, want %+v", c.WorkspaceDefaults, want)
	}
}

func TestModelSettings(t *testing.T) {
	t.Parallel()
	c, err := config.Parse("config.yaml", nil, env("RA_GATEWAY_URL", "https://api.example.com/"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Model.Providers, []string{"anthropic", "openai", "gemini", "mistral", "bedrock"}) ||
		c.Model.GatewayURL != "https://api.example.com" || len(c.Model.Secrets) != 0 || len(c.Model.Upstreams) != 0 || c.Model.Allowed != nil {
		t.Errorf("defaults: %+v", c.Model)
	}
	c, err = config.Parse("config.yaml", nil, env(
		"RA_GATEWAY_URL", "https://api.example.com",
		"RA_MODEL_GATEWAY_URL", "https://model.example.com/",
		"RA_MODEL_PROVIDERS", "anthropic, bedrock",
		"RA_MODEL_ALLOWED", "anthropic:claude-sonnet-4-5,bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0,anthropic:claude-haiku-4-5",
		"RA_MODEL_SECRET_ANTHROPIC", "arn:aws:secretsmanager:us-east-1:123456789012:secret:ra-dev-anthropic",
		"RA_MODEL_UPSTREAM_ANTHROPIC", "http://127.0.0.1:9000/",
		"RA_MODEL_UPSTREAM_BEDROCK", "https://bedrock-runtime.eu-west-1.amazonaws.com",
	))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Model{
		GatewayURL: "https://model.example.com",
		Providers:  []string{"anthropic", "bedrock"},
		Allowed: map[string][]string{
			"anthropic": {"claude-sonnet-4-5", "claude-haiku-4-5"},
			"bedrock":   {"us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		},
		Secrets:   map[string]string{"anthropic": "arn:aws:secretsmanager:us-east-1:123456789012:secret:ra-dev-anthropic"},
		Upstreams: map[string]string{"anthropic": "http://127.0.0.1:9000", "bedrock": "https://bedrock-runtime.eu-west-1.amazonaws.com"},
	}
	if !reflect.DeepEqual(c.Model, want) {
		t.Errorf("from the environment: %+v\nwant %+v", c.Model, want)
	}
	if c, err := config.Parse("config.yaml", nil, env("RA_MODEL_PROVIDERS", "")); err != nil || len(c.Model.Providers) != 0 {
		t.Errorf("RA_MODEL_PROVIDERS empty: %+v, %v; want no provider", c.Model.Providers, err)
	}
	for _, bad := range [][2]string{
		{"RA_MODEL_PROVIDERS", "anthropic,ollama"},
		{"RA_MODEL_ALLOWED", "claude-sonnet-4-5"},
		{"RA_MODEL_ALLOWED", "scripted:x"},
		{"RA_MODEL_UPSTREAM_OPENAI", "api.openai.com"},
		{"RA_MODEL_GATEWAY_URL", "ftp://x"},
	} {
		if _, err := config.Parse("config.yaml", nil, env(bad[0], bad[1])); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: error %v, want one naming the variable", bad[0], bad[1], err)
		}
	}
}

func TestQuotas(t *testing.T) {
	c, err := config.Parse("config.yaml", []byte("remote_agents:\n  quotas:\n    concurrent_sessions: 3\n    upload_gib_per_session: 5\n"), func(name string) (string, bool) {
		v, ok := map[string]string{"RA_QUOTA_STREAMS_PER_SESSION": "2", "RA_QUOTA_UPLOADS_PER_SESSION": "40"}[name]
		return v, ok
	})
	want := config.Quotas{ConcurrentSessions: 3, CreatesPerMinute: config.DefaultQuotas.CreatesPerMinute, StreamsPerSession: 2, UploadsPerSession: 40, UploadGiBPerSession: 5,
		AgentTypes: config.DefaultQuotas.AgentTypes}
	if err != nil || c.Quotas != want {
		t.Fatalf("quotas %+v %v", c.Quotas, err)
	}
	if c.Quotas.PoolQuota() != 3 {
		t.Errorf("warm sandboxes by default: %d, want the live quota", c.Quotas.PoolQuota())
	}
	if _, err := config.Parse("config.yaml", []byte("remote_agents:\n  quotas:\n    creates_per_minute: 0\n"), func(string) (string, bool) { return "", false }); err == nil ||
		!strings.Contains(err.Error(), "remote_agents.quotas.creates_per_minute") {
		t.Errorf("a zero quota: %v", err)
	}
}
