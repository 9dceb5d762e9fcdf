package agenttype_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/agenttype"
	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

var defaults = registry.ResourceLimits{CPU: "1", Memory: "2G", Disk: "20G"}

// memTypes is an in-memory registry.AgentTypes for the service's logic; the
// DynamoDB store has the contract suite (registrytest).
type memTypes map[string]registry.AgentType

func (m memTypes) AgentType(_ context.Context, tenant, id string) (registry.AgentType, error) {
	if t, ok := m[tenant+"#"+id]; ok && tenant != registry.Platform {
		return t, nil
	}
	if t, ok := m[registry.Platform+"#"+id]; ok {
		return t, nil
	}
	return registry.AgentType{}, registry.ErrNotFound
}

func (m memTypes) PooledAgentTypes(context.Context) ([]registry.AgentType, error) {
	var out []registry.AgentType
	for _, t := range m {
		if t.Workspace.WarmPoolSize > 0 {
			out = append(out, t)
		}
	}
	return out, nil
}

func (m memTypes) ListAgentTypes(_ context.Context, tenant string) ([]registry.AgentType, error) {
	var out []registry.AgentType
	for _, t := range m {
		if t.Tenant == tenant || t.Tenant == registry.Platform {
			out = append(out, t)
		}
	}
	return out, nil
}

func (m memTypes) CreateAgentType(_ context.Context, t registry.AgentType) error {
	if _, ok := m[t.Tenant+"#"+t.ID]; ok {
		return registry.ErrExists
	}
	if _, ok := m[registry.Platform+"#"+t.ID]; ok {
		return registry.ErrExists
	}
	m[t.Tenant+"#"+t.ID] = t
	return nil
}

func (m memTypes) PutAgentType(_ context.Context, t registry.AgentType) error {
	t.Tenant = registry.Owner(t.Tenant)
	m[t.Tenant+"#"+t.ID] = t
	return nil
}

func (m memTypes) SetWorkspaceConfig(_ context.Context, tenant, id string, c registry.WorkspaceConfig, at time.Time) error {
	t, ok := m[tenant+"#"+id]
	if !ok || tenant == registry.Platform {
		return registry.ErrNotFound
	}
	t.Workspace, t.UpdatedAt = c, at
	m[tenant+"#"+id] = t
	return nil
}

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func service(t *testing.T) (*agenttype.Service, memTypes) {
	t.Helper()
	reg := memTypes{}
	if err := reg.PutAgentType(t.Context(), registry.AgentType{ID: registry.DefaultAgentType, Name: "Default",
		Workspace: registry.WorkspaceConfig{Enabled: true, RepoSource: registry.RepoSource{Type: registry.RepoNone}, Tools: toolspec.WorkspaceTools()}}); err != nil {
		t.Fatal(err)
	}
	return agenttype.New(agenttype.Options{Registry: reg, Defaults: defaults, Now: func() time.Time { return now }}), reg
}

var (
	dev   = registry.AppKey{ID: "dev", Tenant: "dev"}
	other = registry.AppKey{ID: "dev", Tenant: "other"}
)

func code(err error) apierror.Code { return apierror.CodeOf(err) }

// A new type without a configuration has no workspace; its configuration
// reads back with every field, the setup timeout's default included.
func TestNewTypeHasNoWorkspace(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	v, err := svc.Create(t.Context(), dev, agenttype.CreateRequest{ID: "reviewer", Name: "Reviewer"})
	if err != nil {
		t.Fatal(err)
	}
	// Its sandboxes reach the platform only (egress.Default).
	want := registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "none"}, Tools: []string{}, SetupCommands: []string{}, SetupTimeoutSeconds: 300,
		CheckoutOnStart: new(true), Egress: &egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{}}, OnIdle: registry.OnIdleEnd, CheckpointRetentionDays: 7}
	if !reflect.DeepEqual(v.WorkspaceConfig, want) || v.Platform || v.CreatedAt != now {
		t.Errorf("created %+v, want workspace %+v", v, want)
	}
	got, err := svc.WorkspaceConfig(t.Context(), dev, "reviewer")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("WorkspaceConfig = %+v, %v", got, err)
	}
	if _, err := svc.Create(t.Context(), dev, agenttype.CreateRequest{ID: "reviewer", Name: "Again"}); code(err) != apierror.AgentTypeExists {
		t.Errorf("second create: %v", err)
	}
	if _, err := svc.Create(t.Context(), dev, agenttype.CreateRequest{ID: "default", Name: "Mine"}); code(err) != apierror.AgentTypeExists {
		t.Errorf("create over the platform's default: %v", err)
	}
}

// The spec's scenario: enabled, task_context, six tools, 2 vCPUs and 4G.
func TestSetWorkspaceConfig(t *testing.T) {
	t.Parallel()
	svc, reg := service(t)
	if _, err := svc.Create(t.Context(), dev, agenttype.CreateRequest{ID: "coder", Name: "Coder"}); err != nil {
		t.Fatal(err)
	}
	in := registry.WorkspaceConfig{
		Enabled:        true,
		RepoSource:     registry.RepoSource{Type: "task_context", Branch: "main"},
		Tools:          []string{"bash", "read", "write", "edit", "grep", "git", "read"},
		ResourceLimits: registry.ResourceLimits{CPU: "2", Memory: "4096Mi"},
		SetupCommands:  []string{"npm install", "npm run build"},
		WarmPoolSize:   3,
	}
	got, err := svc.SetWorkspaceConfig(t.Context(), dev, "coder", in)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Tools = []string{"bash", "read", "write", "edit", "grep", "git"}
	want.ResourceLimits = registry.ResourceLimits{CPU: "2", Memory: "4G"}
	want.SetupTimeoutSeconds = 300
	want.CheckoutOnStart = new(true) // left out: cloned
	want.Egress = &egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{}}
	want.OnIdle = registry.OnIdleEnd
	want.CheckpointRetentionDays = registry.DefaultCheckpointRetentionDays
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(reg["dev#coder"].Workspace, want) {
		t.Errorf("stored %+v, want %+v", reg["dev#coder"].Workspace, want)
	}
	// A session of it gets the defaults for what the type leaves out.
	r, err := svc.Resolve(t.Context(), "dev", "coder")
	if err != nil || r.Workspace.ResourceLimits != (registry.ResourceLimits{CPU: "2", Memory: "4G", Disk: "20G"}) {
		t.Errorf("Resolve = %+v, %v", r.Workspace.ResourceLimits, err)
	}
}

func TestPlatformTypesAreReadOnlyAndOtherTenantsUnseen(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	if _, err := svc.SetWorkspaceConfig(t.Context(), dev, "default", registry.WorkspaceConfig{}); code(err) != apierror.Forbidden {
		t.Errorf("PUT on the platform's default: %v, want forbidden", err)
	}
	if _, err := svc.Create(t.Context(), dev, agenttype.CreateRequest{ID: "mine", Name: "Mine"}); err != nil {
		t.Fatal(err)
	}
	unknown := func() error { _, err := svc.Get(t.Context(), other, "nothing"); return err }()
	for name, err := range map[string]error{
		"get":    func() error { _, err := svc.Get(t.Context(), other, "mine"); return err }(),
		"config": func() error { _, err := svc.WorkspaceConfig(t.Context(), other, "mine"); return err }(),
		"set": func() error {
			_, err := svc.SetWorkspaceConfig(t.Context(), other, "mine", registry.WorkspaceConfig{})
			return err
		}(),
		"resolve": func() error { _, err := svc.Resolve(t.Context(), "other", "mine"); return err }(),
	} {
		if code(err) != apierror.AgentTypeNotFound || strings.ReplaceAll(err.Error(), "mine", "nothing") != unknown.Error() {
			t.Errorf("%s of another tenant's type: %v; want what an unknown one gets, %v", name, err, unknown)
		}
	}
	list, err := svc.List(t.Context(), other)
	if err != nil || len(list.AgentTypes) != 1 || list.AgentTypes[0].ID != "default" || !list.AgentTypes[0].Platform {
		t.Errorf("other's list = %+v, %v; want only the platform's default", list, err)
	}
	list, err = svc.List(t.Context(), dev)
	if err != nil || len(list.AgentTypes) != 2 || list.AgentTypes[0].ID != "mine" || list.AgentTypes[1].ID != "default" {
		t.Errorf("dev's list = %+v, %v; want its own, then the platform's", list, err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 3000)
	tests := []struct {
		name string
		in   registry.WorkspaceConfig
		want string // "" = valid
	}{
		{"empty", registry.WorkspaceConfig{}, ""},
		{"every tool", registry.WorkspaceConfig{Enabled: true, Tools: toolspec.WorkspaceTools()}, ""},
		{"fixed https", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "fixed", URL: "https://github.com/org/infra-repo"}}, ""},
		{"fixed without url", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "fixed"}}, "repo_source.url is required"},
		{"fixed file", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "fixed", URL: "file:///etc"}}, "https URL"},
		{"fixed ext", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "fixed", URL: "ext::sh -c touch% /tmp/pwned"}}, "https URL"},
		{"fixed http", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "fixed", URL: "http://github.com/org/r"}}, "https URL"},
		{"fixed git", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "fixed", URL: "git://github.com/org/r"}}, "https URL"},
		{"credentials", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "fixed", URL: "https://user:tok@github.com/org/r"}}, "credentials"},
		{"url too long", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "fixed", URL: "https://x/" + long}}, "at most 2048"},
		{"url for task_context", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "task_context", URL: "https://x/y"}}, "only for repo_source.type fixed"},
		{"unknown type", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "s3"}}, "task_context, fixed or none"},
		{"type missing", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Branch: "main"}}, "task_context, fixed or none"},
		{"branch option", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "task_context", Branch: "--upload-pack=x"}}, "branch name"},
		{"branch dots", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "task_context", Branch: "a/../b"}}, "branch name"},
		{"branch for none", registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: "none", Branch: "main"}}, "not for repo_source.type none"},
		{"unknown tools", registry.WorkspaceConfig{Tools: []string{"bash", "ssh", "telnet"}}, "Unknown tools: ssh, telnet. Valid tools: read, write"},
		{"not a tool name", registry.WorkspaceConfig{Tools: []string{"rm -rf"}}, "tools[0] is not a tool name"},
		{"too many tools", registry.WorkspaceConfig{Tools: make([]string, 33)}, "at most 32"},
		{"cpu", registry.WorkspaceConfig{ResourceLimits: registry.ResourceLimits{CPU: "3"}}, "resource_limits.cpu must be one of 0.25, 0.5, 1, 2, 4, 8 or 16 vCPUs."},
		{"memory", registry.WorkspaceConfig{ResourceLimits: registry.ResourceLimits{Memory: "4T"}}, "resource_limits.memory must be a size"},
		{"combination", registry.WorkspaceConfig{ResourceLimits: registry.ResourceLimits{CPU: "2", Memory: "1G"}}, "2 vCPU takes 4G to 16G in 1G steps of memory, not 1G"},
		{"cpu against the default memory", registry.WorkspaceConfig{ResourceLimits: registry.ResourceLimits{CPU: "16"}}, "16 vCPU takes 32G to 120G in 8G steps of memory, not 2G"},
		{"disk low", registry.WorkspaceConfig{ResourceLimits: registry.ResourceLimits{Disk: "10G"}}, "disk must be from 20G to 200G"},
		{"disk high", registry.WorkspaceConfig{ResourceLimits: registry.ResourceLimits{Disk: "500G"}}, "disk must be from 20G to 200G"},
		{"limit too long", registry.WorkspaceConfig{ResourceLimits: registry.ResourceLimits{CPU: long}}, "at most 16 bytes"},
		{"setup empty command", registry.WorkspaceConfig{SetupCommands: []string{" "}}, "setup_commands[0]"},
		{"setup too many", registry.WorkspaceConfig{SetupCommands: make([]string, 21)}, "at most 20"},
		{"setup timeout", registry.WorkspaceConfig{SetupTimeoutSeconds: -1}, "setup_timeout_seconds"},
		{"on idle", registry.WorkspaceConfig{OnIdle: "sleep"}, "on_idle must be end or pause"},
		{"retention low", registry.WorkspaceConfig{CheckpointRetentionDays: -1}, "checkpoint_retention_days must be from 1 to 365"},
		{"retention high", registry.WorkspaceConfig{CheckpointRetentionDays: 366}, "checkpoint_retention_days must be from 1 to 365"},
		{"retention", registry.WorkspaceConfig{CheckpointRetentionDays: 30}, ""},
		{"setup timeout high", registry.WorkspaceConfig{SetupTimeoutSeconds: 3601}, "setup_timeout_seconds"},
		{"warm pool", registry.WorkspaceConfig{WarmPoolSize: 101}, "warm_pool_size"},
		{"base image", registry.WorkspaceConfig{BaseImage: "$(curl evil)"}, "base_image"},
		{"egress", registry.WorkspaceConfig{Egress: &egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"api.example.com:443", "preset:npm", "10.0.0.0/8"}}}, ""},
		{"egress mode", registry.WorkspaceConfig{Egress: &egress.Policy{Mode: "closed"}}, "egress.mode must be one of open, allowlist, none"},
		{"egress entry", registry.WorkspaceConfig{Egress: &egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"ok.example.com", "https://x.example.com/"}}}, "egress.allow[1]"},
		{"secrets", registry.WorkspaceConfig{Secrets: []string{"github", "openai.key"}}, ""},
		{"secret name", registry.WorkspaceConfig{Secrets: []string{"../etc"}}, "secrets[0]"},
		{"too many secrets", registry.WorkspaceConfig{Secrets: make([]string, 33)}, "at most 32"},
	}
	for _, tt := range tests {
		_, err := agenttype.Validate(tt.in, defaults)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (code(err) != apierror.InvalidRequest || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want invalid_request with %q", tt.name, err, tt.want)
		}
	}
	_, err := agenttype.Validate(registry.WorkspaceConfig{Tools: []string{"bash", "ssh"}}, defaults)
	var e *apierror.Error
	if !errors.As(err, &e) || !reflect.DeepEqual(e.Details["invalid_tools"], []string{"ssh"}) || !reflect.DeepEqual(e.Details["valid_tools"], toolspec.WorkspaceTools()) {
		t.Errorf("details of unknown tools: %+v", e)
	}
}

func FuzzValidate(f *testing.F) {
	f.Add("2", "4G", "40G", "fixed", "https://github.com/org/r", "main", "bash")
	f.Fuzz(func(t *testing.T, cpu, mem, disk, typ, url, branch, tool string) {
		c := registry.WorkspaceConfig{RepoSource: registry.RepoSource{Type: typ, URL: url, Branch: branch}, Tools: []string{tool},
			ResourceLimits: registry.ResourceLimits{CPU: cpu, Memory: mem, Disk: disk}}
		out, err := agenttype.Validate(c, defaults)
		if err != nil {
			if code(err) != apierror.InvalidRequest {
				t.Errorf("error %v is not invalid_request", err)
			}
			return
		}
		// What is valid stays valid, unchanged, when validated again.
		again, err := agenttype.Validate(out, defaults)
		if err != nil || !reflect.DeepEqual(again, out) {
			t.Errorf("revalidating %+v: %+v, %v", out, again, err)
		}
	})
}

// A fixed repository may be plain http or git to the hosts the operator
// lists, and only to them; credentials, file: and ext:: never.
func TestFixedRepositoryOverInsecureHosts(t *testing.T) {
	t.Parallel()
	hosts := []string{"127.0.0.1", "git.internal"}
	fixed := func(url string) registry.WorkspaceConfig {
		return registry.WorkspaceConfig{Enabled: true, RepoSource: registry.RepoSource{Type: registry.RepoFixed, URL: url}}
	}
	for _, ok := range []string{"http://127.0.0.1:8080/app.git", "git://git.internal/app.git", "https://github.com/org/repo"} {
		if _, err := agenttype.ValidateWith(fixed(ok), defaults, hosts); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://example.com/app.git", "http://bob:pw@127.0.0.1/app.git", "file:///srv/app.git", "ext::sh -c id", "ssh://127.0.0.1/app"} {
		if _, err := agenttype.ValidateWith(fixed(bad), defaults, hosts); code(err) != apierror.InvalidRequest || strings.Contains(err.Error(), "pw@") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := agenttype.Validate(fixed("http://127.0.0.1:8080/app.git"), defaults); code(err) != apierror.InvalidRequest {
		t.Errorf("http without listed hosts: %v", err)
	}
}
