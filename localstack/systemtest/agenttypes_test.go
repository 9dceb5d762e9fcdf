package systemtest_test

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

const agentTypes = "/api/v1/agent-types"

// everyTool is toolspec.WorkspaceTools as JSON decodes it.
func everyTool() []any {
	var out []any
	for _, n := range toolspec.WorkspaceTools() {
		out = append(out, n)
	}
	return out
}

// The agent type routes over HTTP, with the dev app's key and another
// tenant's: create, list, read, the workspace configuration read and replaced,
// and what is refused.
func TestAgentTypeRoutes(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.addTenant(t, "other", otherKey)

	// No key, a wrong key: on every route, before any body is read.
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, agentTypes}, {http.MethodGet, agentTypes}, {http.MethodGet, agentTypes + "/default"},
		{http.MethodGet, agentTypes + "/default/workspace-config"}, {http.MethodPut, agentTypes + "/default/workspace-config"},
		{http.MethodPost, "/api/v1/secrets"}, {http.MethodGet, "/api/v1/secrets"}, {http.MethodPut, "/api/v1/secrets/x"}, {http.MethodDelete, "/api/v1/secrets/x"},
	} {
		wantError(t, s.call(r.method, r.path, "", map[string]any{}), 401, "missing_token")
		wantError(t, s.call(r.method, r.path, "rak_not_a_key", "{not json"), 401, "invalid_token")
	}

	// A new type has no workspace; every field is shown, base_image null.
	created := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "coder", "name": "Coder"})
	if created.status != http.StatusCreated || created.str("id") != "coder" || created.body["platform"] != false {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	// Its sandboxes reach the platform only (egress: an allowlist of nothing).
	fenced := map[string]any{"mode": "allowlist", "allow": []any{}}
	wantNone := map[string]any{"enabled": false, "repo_source": map[string]any{"type": "none"}, "tools": []any{}, "resource_limits": map[string]any{},
		"checkout_on_start": true, "base_image": nil, "setup_commands": []any{}, "setup_timeout_seconds": float64(300), "warm_pool_size": float64(0),
		"egress": fenced, "on_idle": "end", "resume_on_message": false, "checkpoint_retention_days": float64(7)}
	if got := created.body["workspace_config"]; !reflect.DeepEqual(got, wantNone) {
		t.Errorf("new type's workspace: %v, want %v", got, wantNone)
	}
	wantError(t, s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "coder", "name": "Again"}), 409, "agent_type_exists")
	wantError(t, s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "default", "name": "Mine"}), 409, "agent_type_exists")
	wantError(t, s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "x", "name": "X", "owner": "platform"}), 400, "invalid_request")
	wantError(t, s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "../x", "name": "X"}), 400, "invalid_request")
	wantError(t, s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "x"}), 400, "invalid_request")

	// The list: the tenant's, then the platform's seeded default (a
	// workspace, no repository, every tool).
	list := s.call(http.MethodGet, agentTypes, appKey, nil)
	items, _ := list.body["agent_types"].([]any)
	if list.status != http.StatusOK || len(items) != 2 {
		t.Fatalf("list: %d %s", list.status, list.raw)
	}
	def := items[1].(map[string]any)
	ws := def["workspace_config"].(map[string]any)
	if items[0].(map[string]any)["id"] != "coder" || def["id"] != "default" || def["platform"] != true ||
		ws["enabled"] != true || !reflect.DeepEqual(ws["repo_source"], map[string]any{"type": "none"}) || !reflect.DeepEqual(ws["tools"], everyTool()) {
		t.Errorf("list: %s", list.raw)
	}
	if r := s.call(http.MethodGet, agentTypes+"/coder", appKey, nil); r.status != http.StatusOK || r.str("name") != "Coder" {
		t.Errorf("get: %d %s", r.status, r.raw)
	}

	// The spec's configuration, written back as stored.
	config := map[string]any{
		"enabled":         true,
		"repo_source":     map[string]any{"type": "task_context", "branch": "main"},
		"tools":           []string{"bash", "read", "write", "edit", "grep", "git"},
		"resource_limits": map[string]any{"cpu": "2", "memory": "4G"},
		"setup_commands":  []string{"npm install --frozen-lockfile"},
		"warm_pool_size":  1,
	}
	put := s.call(http.MethodPut, agentTypes+"/coder/workspace-config", appKey, config)
	if put.status != http.StatusOK {
		t.Fatalf("put: %d %s", put.status, put.raw)
	}
	got := s.call(http.MethodGet, agentTypes+"/coder/workspace-config", appKey, nil)
	want := map[string]any{"enabled": true, "repo_source": map[string]any{"type": "task_context", "branch": "main"},
		"tools": []any{"bash", "read", "write", "edit", "grep", "git"}, "resource_limits": map[string]any{"cpu": "2", "memory": "4G"},
		"checkout_on_start": true, "base_image": nil, "setup_commands": []any{"npm install --frozen-lockfile"}, "setup_timeout_seconds": float64(300), "warm_pool_size": float64(1),
		"egress": fenced, "on_idle": "end", "resume_on_message": false, "checkpoint_retention_days": float64(7)}
	if got.status != http.StatusOK || !reflect.DeepEqual(got.body, want) || !reflect.DeepEqual(put.body, want) {
		t.Errorf("workspace config after PUT: %d %s\nPUT answered %s", got.status, got.raw, put.raw)
	}

	// Unknown tools: the invalid names and the valid ones, in the message
	// and the details.
	bad := s.call(http.MethodPut, agentTypes+"/coder/workspace-config", appKey, map[string]any{"enabled": true, "tools": []string{"bash", "ssh"}})
	wantError(t, bad, 400, "invalid_request")
	details, _ := bad.body["details"].(map[string]any)
	if !strings.Contains(bad.str("message"), "ssh") || !strings.Contains(bad.str("message"), "read, write, edit") ||
		!reflect.DeepEqual(details["invalid_tools"], []any{"ssh"}) || !reflect.DeepEqual(details["valid_tools"], everyTool()) {
		t.Errorf("unknown tools: %s", bad.raw)
	}
	huge := strings.Repeat("x", 200*1024)
	for name, body := range map[string]any{
		"limits Fargate has not":    map[string]any{"resource_limits": map[string]any{"cpu": "2", "memory": "1G"}},
		"a cpu Fargate has not":     map[string]any{"resource_limits": map[string]any{"cpu": "3"}},
		"too much disk":             map[string]any{"resource_limits": map[string]any{"disk": "500G"}},
		"an unknown limit":          map[string]any{"resource_limits": map[string]any{"gpu": "1"}},
		"an unknown field":          map[string]any{"enabled": true, "privileged": true},
		"an unknown source field":   map[string]any{"repo_source": map[string]any{"type": "none", "token": "ghp_x"}},
		"a repo source type":        map[string]any{"repo_source": map[string]any{"type": "svn"}},
		"fixed without a URL":       map[string]any{"repo_source": map[string]any{"type": "fixed"}},
		"a file: URL":               map[string]any{"repo_source": map[string]any{"type": "fixed", "url": "file:///etc/passwd"}},
		"an ext:: URL":              map[string]any{"repo_source": map[string]any{"type": "fixed", "url": "ext::sh -c id"}},
		"a branch that is a option": map[string]any{"repo_source": map[string]any{"type": "task_context", "branch": "--upload-pack=id"}},
		"a wrong type":              map[string]any{"tools": "bash"},
		"not JSON":                  "{enabled: true",
	} {
		r := s.call(http.MethodPut, agentTypes+"/coder/workspace-config", appKey, body)
		if r.status != 400 || r.str("error_code") != "invalid_request" {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	// A body over the route's limit is 413, one of another type than JSON 415.
	wantError(t, s.call(http.MethodPut, agentTypes+"/coder/workspace-config", appKey, map[string]any{"setup_commands": []string{huge}}), 413, "payload_too_large")
	wantError(t, s.call(http.MethodPut, agentTypes+"/coder/workspace-config", appKey, "enabled=true", "Content-Type", "application/x-www-form-urlencoded"), 415, "unsupported_media_type")
	if r := s.call(http.MethodPut, agentTypes+"/coder/workspace-config", appKey, map[string]any{"resource_limits": map[string]any{"cpu": "2", "memory": "1G"}}); !strings.Contains(r.str("message"), "2 vCPU takes 4G to 16G in 1G steps of memory, not 1G") {
		t.Errorf("limits Fargate has not: %s", r.raw)
	}
	if again := s.call(http.MethodGet, agentTypes+"/coder/workspace-config", appKey, nil); !reflect.DeepEqual(again.body, want) {
		t.Errorf("refused PUTs changed the configuration: %s", again.raw)
	}

	// The platform's default: everyone's to use, nobody's to change.
	wantError(t, s.call(http.MethodPut, agentTypes+"/default/workspace-config", appKey, map[string]any{"enabled": false}), 403, "forbidden")
	wantError(t, s.call(http.MethodPut, agentTypes+"/default/workspace-config", otherKey, map[string]any{"enabled": false}), 403, "forbidden")
	if r := s.call(http.MethodGet, agentTypes+"/default/workspace-config", otherKey, nil); r.status != http.StatusOK || r.body["enabled"] != true {
		t.Errorf("other tenant reads the default: %d %s", r.status, r.raw)
	}

	// Another tenant's type is, word for word, one that does not exist.
	for _, path := range []string{"", "/workspace-config"} {
		unknown := s.call(http.MethodGet, agentTypes+"/nothing"+path, otherKey, nil)
		wantError(t, unknown, 404, "agent_type_not_found")
		theirs := s.call(http.MethodGet, agentTypes+"/coder"+path, otherKey, nil)
		if want := strings.ReplaceAll(unknown.raw, "nothing", "coder"); theirs.raw != want {
			t.Errorf("GET another tenant's type%s:\n%s\nwant, as for none:\n%s", path, theirs.raw, want)
		}
	}
	wantError(t, s.call(http.MethodPut, agentTypes+"/coder/workspace-config", otherKey, map[string]any{"enabled": false}), 404, "agent_type_not_found")
	wantError(t, s.call(http.MethodGet, agentTypes+"/NOT-A-SLUG", appKey, nil), 404, "agent_type_not_found")
	others := s.call(http.MethodGet, agentTypes, otherKey, nil)
	if items, _ := others.body["agent_types"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != "default" {
		t.Errorf("other tenant's list: %s", others.raw)
	}
	// Its own type of the same id is its own.
	if r := s.call(http.MethodPost, agentTypes, otherKey, map[string]any{"id": "coder", "name": "Other's coder"}); r.status != http.StatusCreated {
		t.Errorf("other creates its own coder: %d %s", r.status, r.raw)
	}
	if r := s.call(http.MethodGet, agentTypes+"/coder/workspace-config", appKey, nil); !reflect.DeepEqual(r.body, want) {
		t.Errorf("dev's coder after other's create: %s", r.raw)
	}
}

// Create: the persona's agent type, or the one the request names; the session
// keeps the configuration it started with when the type changes; an unknown
// type, or another tenant's, is 404 agent_type_not_found.
func TestCreateTakesTheAgentType(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) {
		c.CreationTimeout = 20 * time.Second
		c.WorkspaceDefaults = config.WorkspaceLimits{CPU: "0.5", Memory: "1G", Disk: "30G"}
	}))
	s.addTenant(t, "other", otherKey)
	store := s.srv.Env.SessionStore()
	running := map[string]bool{}
	ready := func(bearer string, body map[string]any) string {
		t.Helper()
		id, _, _ := s.readyAs(t, bearer, body, running)
		running[id] = true
		return id
	}
	workspace := func(id string) (string, *registry.WorkspaceConfig) {
		t.Helper()
		sess, err := store.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if sess.Workspace == nil {
			t.Fatalf("session %s of agent type %q has no workspace configuration", id, sess.AgentType)
		}
		return sess.AgentType, sess.Workspace
	}

	// The persona's type: the seeded default, with the platform's limits.
	id := ready(appKey, createBody("Hello"))
	typ, ws := workspace(id)
	if typ != "default" || !ws.Enabled || ws.RepoSource.Type != "none" || !slices.Equal(ws.Tools, toolspec.WorkspaceTools()) ||
		ws.ResourceLimits != (registry.ResourceLimits{CPU: "0.5", Memory: "1G", Disk: "30G"}) || ws.SetupTimeoutSeconds != 300 {
		t.Errorf("session of the persona's type: %q %+v", typ, ws)
	}

	// The request's type instead.
	if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "reader", "name": "Reader",
		"workspace_config": map[string]any{"enabled": true, "tools": []string{"read", "grep"}, "resource_limits": map[string]any{"memory": "2G"}}}); r.status != http.StatusCreated {
		t.Fatalf("create type: %d %s", r.status, r.raw)
	}
	body := createBody("Read")
	body["agent_type"] = "reader"
	before := ready(appKey, body)
	typ, ws = workspace(before)
	if typ != "reader" || !ws.Enabled || !slices.Equal(ws.Tools, []string{"read", "grep"}) ||
		ws.ResourceLimits != (registry.ResourceLimits{CPU: "0.5", Memory: "2G", Disk: "30G"}) {
		t.Errorf("session of the requested type: %q %+v", typ, ws)
	}

	// A PUT applies to sessions created after it, not to the running one.
	if r := s.call(http.MethodPut, agentTypes+"/reader/workspace-config", appKey, map[string]any{"enabled": true, "tools": []string{"read"},
		"repo_source": map[string]any{"type": "fixed", "url": "https://github.com/org/infra-repo"}, "resource_limits": map[string]any{"cpu": "2", "memory": "4G"}}); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.raw)
	}
	if _, still := workspace(before); !reflect.DeepEqual(still, ws) {
		t.Errorf("the running session's workspace changed with its type: %+v, it started with %+v", still, ws)
	}
	body["initial_prompt"] = "Read again"
	_, after := workspace(ready(appKey, body))
	if !slices.Equal(after.Tools, []string{"read"}) || after.RepoSource.URL != "https://github.com/org/infra-repo" ||
		after.ResourceLimits != (registry.ResourceLimits{CPU: "2", Memory: "4G", Disk: "30G"}) {
		t.Errorf("session created after the PUT: %+v", after)
	}

	// Unknown, and another tenant's: the same 404, before any session exists.
	body["agent_type"] = "nothing"
	unknown := s.create(body)
	wantError(t, unknown, 404, "agent_type_not_found")
	theirs := s.call(http.MethodPost, "/api/remote_agents/create", otherKey, map[string]any{"project_name": "demo", "persona_slug": "assistant", "initial_prompt": "Read again", "agent_type": "reader"})
	if want := strings.ReplaceAll(unknown.raw, "nothing", "reader"); theirs.raw != want {
		t.Errorf("create with another tenant's type:\n%s\nwant, as for none:\n%s", theirs.raw, want)
	}
	body["agent_type"] = "Not A Slug"
	wantError(t, s.create(body), 400, "invalid_request")
}
