package systemtest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// runTool calls POST /api/remote_agents/{id}/workspace/tools/{tool}.
func (s *stack) runTool(id, tok, tool string, body any, headers ...string) reply {
	s.t.Helper()
	return s.call(http.MethodPost, "/api/remote_agents/"+id+"/workspace/tools/"+tool, tok, body, headers...)
}

// createTyped creates a ready agent of agent type typ and returns its id and
// token.
func (s *stack) createTyped(t testing.TB, typ string) (string, string) {
	t.Helper()
	body := createBody("Hello")
	body["agent_type"] = typ
	r := s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create %s: %d %s", typ, r.status, r.raw)
	}
	return r.str("agent_id"), r.str("session_token")
}

// An app runs workspace tools in a real sandbox whose workspace is a clone of
// a repository served over HTTP on loopback: read, ls, git and bash answer
// what the workspace holds; a retry with the same Idempotency-Key replays
// the result and runs nothing twice; a tool the type does not enable is 403
// before anything is queued, an unknown one 404, bad bodies 400; each call is
// on the events stream; after shutdown, 409.
func TestWorkspaceToolsRunInTheSandbox(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 25 * time.Second }))
	repo := serveRepo(t)
	s.putType(t, "coder", map[string]any{"enabled": true, "tools": []string{"read", "ls", "bash", "git"},
		"repo_source": map[string]any{"type": "fixed", "url": repo.URL, "branch": "develop"}})
	id, tok := s.createTyped(t, "coder")

	read := s.runTool(id, tok, "read", map[string]any{"args": map[string]any{"path": "src/dev.txt"}})
	if read.status != http.StatusOK || read.body["is_error"] != false || !strings.Contains(read.str("output"), "dev") || read.str("request_id") == "" || read.str("tool") != "read" {
		t.Fatalf("read: %d %s", read.status, read.raw)
	}
	if ls := s.runTool(id, tok, "ls", map[string]any{}); ls.status != http.StatusOK || !strings.Contains(ls.str("output"), "README.md") || !strings.Contains(ls.str("output"), "src") {
		t.Errorf("ls: %d %s", ls.status, ls.raw)
	}
	if g := s.runTool(id, tok, "git", map[string]any{"args": map[string]any{"subcommand": "status"}}); g.status != http.StatusOK || g.body["is_error"] != false || !strings.Contains(g.str("output"), "develop") {
		t.Errorf("git status: %d %s", g.status, g.raw)
	}
	// A failing tool is a result, not an HTTP error.
	if missing := s.runTool(id, tok, "read", map[string]any{"args": map[string]any{"path": "nope.txt"}}); missing.status != http.StatusOK || missing.body["is_error"] != true {
		t.Errorf("read of a missing file: %d %s", missing.status, missing.raw)
	}

	// The same request id twice: one run, the result replayed.
	appendLine := map[string]any{"args": map[string]any{"command": "echo x >> count.txt && wc -l < count.txt"}}
	first := s.runTool(id, tok, "bash", appendLine, "Idempotency-Key", "append-once")
	if first.status != http.StatusOK || !strings.Contains(first.str("output"), "stdout:\n1\n") || first.str("request_id") != "append-once" {
		t.Fatalf("bash: %d %s", first.status, first.raw)
	}
	again := s.runTool(id, tok, "bash", appendLine, "Idempotency-Key", "append-once")
	if again.status != http.StatusOK || again.str("output") != first.str("output") || again.headers.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: %d %v %s", again.status, again.headers, again.raw)
	}
	if got, err := os.ReadFile(filepath.Join(s.workspaceOf(id), "count.txt")); err != nil || string(got) != "x\n" {
		t.Errorf("count.txt = %q (%v): the retry ran the command again", got, err)
	}
	other := map[string]any{"args": map[string]any{"command": "echo y >> count.txt"}}
	wantError(t, s.runTool(id, tok, "bash", other, "Idempotency-Key", "append-once"), http.StatusConflict, "idempotency_key_reused")

	// Refused at the edge, before anything is queued.
	before, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	write := s.runTool(id, tok, "write", map[string]any{"args": map[string]any{"path": "a.txt", "content": "a"}})
	wantError(t, write, http.StatusForbidden, "tool_not_enabled")
	if write.str("message") != "Tool 'write' is not enabled for this agent type" {
		t.Errorf("403 message %q", write.str("message"))
	}
	unknown := s.runTool(id, tok, "ssh", map[string]any{})
	wantError(t, unknown, http.StatusNotFound, "tool_not_found")
	if !strings.Contains(unknown.str("message"), "read, write, edit") {
		t.Errorf("404 names no tools: %s", unknown.raw)
	}
	for name, body := range map[string]any{
		"args not an object": map[string]any{"args": "README.md"},
		"args an array":      map[string]any{"args": []any{"README.md"}},
		"an unknown field":   map[string]any{"args": map[string]any{"path": "README.md"}, "tool": "bash"},
		"no JSON":            "read README.md",
		"oversized args":     map[string]any{"args": map[string]any{"path": strings.Repeat("a", sandboxwire.MaxToolArgsBytes)}},
	} {
		if r := s.runTool(id, tok, "read", body); r.status != http.StatusBadRequest && r.status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	wantError(t, s.runTool(id, tok, "read", map[string]any{}, "Idempotency-Key", strings.Repeat("k", 200)), http.StatusBadRequest, "invalid_request")
	wantError(t, s.runTool(id, "rst_not_a_token", "read", map[string]any{}), http.StatusUnauthorized, "invalid_token")
	after, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if queued := requests(after) - requests(before); queued != 0 {
		t.Errorf("%d refused requests were queued", queued)
	}

	// Each call is on the events stream: the request, then its result.
	var tools []string
	for _, e := range after {
		if e.Type == sandboxwire.TypeWorkspaceTool {
			tools = append(tools, e.Data["tool"].(string))
			if e.Data["request_id"] == "append-once" && !strings.Contains(e.Data["args"].(string), "count.txt") {
				t.Errorf("workspace.tool event without its arguments: %v", e.Data)
			}
		}
	}
	if want := []string{"read", "ls", "git", "read", "bash"}; !slices.Equal(tools, want) {
		t.Errorf("workspace.tool events %v, want %v", tools, want)
	}
	if n := requests(after); n != 5 {
		t.Errorf("%d workspace.tool_request events, want 5", n)
	}

	// Apps and the embed view see them on the stream: the request without its
	// arguments, the result with them as the sandbox shows them.
	shown := 0
	for _, ev := range s.openSSE(t, id, tok, 0, "").next(t, len(after)) {
		data, _ := ev.Data["data"].(map[string]any)
		switch ev.Type {
		case sandboxwire.TypeWorkspaceToolRequest:
			if _, ok := data["args"]; ok || data["tool"] == nil {
				t.Errorf("the stream shows a request's arguments: %v", data)
			}
		case sandboxwire.TypeWorkspaceTool:
			shown++
		}
	}
	if shown != 5 {
		t.Errorf("%d workspace.tool events on the stream, want 5", shown)
	}

	if r := s.shutdown(id, tok); r.status != http.StatusOK {
		t.Fatalf("shutdown: %d %s", r.status, r.raw)
	}
	wantError(t, s.runTool(id, tok, "read", map[string]any{"args": map[string]any{"path": "README.md"}}), http.StatusConflict, "agent_not_alive")
}

func requests(evs []session.Event) int {
	n := 0
	for _, e := range evs {
		if e.Type == sandboxwire.TypeWorkspaceToolRequest {
			n++
		}
	}
	return n
}

// A session whose type has no workspace has no workspace tools: 404
// workspace_disabled, whatever the tool.
func TestWorkspaceToolsOfADisabledWorkspace(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	s.putType(t, "chat", map[string]any{"enabled": false})
	id, tok := s.createTyped(t, "chat")
	for _, tool := range []string{"read", "bash", "ssh"} {
		wantError(t, s.runTool(id, tok, tool, map[string]any{"args": map[string]any{"path": "README.md"}}), http.StatusNotFound, "workspace_disabled")
	}
}
