package systemtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/session"
)

// readySandbox creates a session from body with a fake sandbox, acts as its
// sandbox until ready, and returns the session id, its session token, its
// sandbox token and its spec.
func (s *stack) readySandbox(t testing.TB, body map[string]any) (string, string, string, reply) {
	t.Helper()
	created := make(chan reply, 1)
	go func() { created <- s.create(body) }()
	id := s.firstSandboxExcept(t, nil)
	sb := s.sandboxToken(t, id)
	spec := s.call(http.MethodGet, "/sandbox/"+id+"/spec", sb, nil)
	if spec.status != http.StatusOK {
		t.Fatalf("spec: %d %s", spec.status, spec.raw)
	}
	hash := spec.body["guardrails"].(map[string]any)["hash"].(string)
	if r := s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "ready", "guardrails_hash": hash}); r.status != http.StatusOK {
		t.Fatalf("ready: %d %s", r.status, r.raw)
	}
	r := <-created
	if r.status != http.StatusOK || r.str("agent_id") != id {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	return id, r.str("session_token"), sb, spec
}

// firstSandboxExcept waits for a sandbox of a session not in skip.
func (s *stack) firstSandboxExcept(t testing.TB, skip map[string]bool) string {
	t.Helper()
	var id string
	eventually(t, 10*time.Second, "sandbox started", func() bool {
		entries, _ := os.ReadDir(filepath.Join(s.work, "sandboxes"))
		for _, e := range entries {
			// A sandbox's workspace, not its private folder (<key>.tmp).
			if name, ok := strings.CutSuffix(e.Name(), "-1"); ok && e.IsDir() && !skip[name] {
				id = name
				return true
			}
		}
		return false
	})
	return id
}

func (s *stack) tool(id, bearer, tool, callID string, args any) reply {
	s.t.Helper()
	return s.call(http.MethodPost, "/proliferate/"+id+"/tools/"+tool, bearer, map[string]any{"tool_call_id": callID, "args": args})
}

// toolDone posts a tool call until it is no longer pending.
func (s *stack) toolDone(t *testing.T, id, bearer, tool, callID string, args any) reply {
	t.Helper()
	var r reply
	eventually(t, 20*time.Second, tool+" done", func() bool {
		r = s.tool(id, bearer, tool, callID, args)
		return r.status != http.StatusAccepted
	})
	return r
}

func wantToolError(t *testing.T, r reply, status int, code string) {
	t.Helper()
	wantError(t, r, status, code)
	if r.body["success"] != false || r.str("result") != r.str("message") {
		t.Errorf("a tool error must carry success:false and the message as result: %s", r.raw)
	}
}

func setupBody() map[string]any {
	b := createBody("Set up the repository.")
	b["session_type"] = "setup"
	b["configuration_id"] = "demo-web"
	return b
}

// The gateway-mediated tools over HTTP, as a sandbox calls them, in a setup
// session: every tool's side effect, replays, and what is refused.
func TestToolCallbacksInASetupSession(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	id, sessionTok, sb, spec := s.readySandbox(t, setupBody())
	if spec.str("session_type") != "setup" || spec.str("prompt_mode") != "setup" || !strings.Contains(spec.str("system_prompt"), "demo/web") {
		t.Errorf("spec of a setup session: %s", spec.raw)
	}
	ctx := t.Context()

	// save_service_commands: stored on the configuration; a retry is a replay.
	cmds := map[string]any{"commands": []any{map[string]any{"name": "web", "command": "npm run dev", "cwd": "apps/web"}}}
	r := s.tool(id, sb, "save_service_commands", "call-cmds", cmds)
	if r.status != http.StatusOK || r.body["success"] != true || r.headers.Get("Idempotent-Replayed") != "" {
		t.Fatalf("save_service_commands: %d %s", r.status, r.raw)
	}
	again := s.tool(id, sb, "save_service_commands", "call-cmds", cmds)
	if again.status != http.StatusOK || again.headers.Get("Idempotent-Replayed") != "true" || again.raw != r.raw {
		t.Errorf("replay: %d %v %s", again.status, again.headers, again.raw)
	}
	cfg, err := s.srv.Env.Registry().Configuration(ctx, devserver.DevTenant, "demo-web")
	if err != nil || len(cfg.ServiceCommands) != 1 || cfg.ServiceCommands[0].Cwd != "apps/web" {
		t.Errorf("configuration %+v %v", cfg, err)
	}
	// The same tool_call_id with other arguments is refused.
	wantToolError(t, s.tool(id, sb, "save_service_commands", "call-cmds", map[string]any{"commands": []any{map[string]any{"name": "x", "command": "y"}}}), 409, "idempotency_key_reused")

	// save_env_files: the spec is stored, never a value.
	files := map[string]any{"files": []any{map[string]any{"path": "apps/web/.env.local", "format": "dotenv", "mode": "secret", "keys": []any{map[string]any{"key": "DATABASE_URL", "required": true}}}}}
	if r := s.tool(id, sb, "save_env_files", "call-env", files); r.status != http.StatusOK || r.body["success"] != true {
		t.Fatalf("save_env_files: %d %s", r.status, r.raw)
	}
	cfg, _ = s.srv.Env.Registry().Configuration(ctx, devserver.DevTenant, "demo-web")
	if len(cfg.EnvFiles) != 1 || cfg.EnvFiles[0].Keys[0].Key != "DATABASE_URL" || cfg.EnvFiles[0].WorkspacePath != "." {
		t.Errorf("env files %+v", cfg.EnvFiles)
	}
	withValue := map[string]any{"files": []any{map[string]any{"path": ".env", "format": "dotenv", "mode": "secret", "keys": []any{map[string]any{"key": "A", "required": true, "value": "hunter2"}}}}}
	wantToolError(t, s.tool(id, sb, "save_env_files", "call-env-2", withValue), 400, "invalid_request")
	wantToolError(t, s.tool(id, sb, "save_env_files", "call-env-3", map[string]any{"files": []any{map[string]any{"path": "../../.env", "format": "dotenv", "mode": "secret", "keys": []any{map[string]any{"key": "A", "required": true}}}}}), 400, "invalid_request")

	// automation.complete: keyed by completion_id, under either name.
	done := map[string]any{"run_id": "run-9", "completion_id": "done-1", "outcome": "succeeded", "summary_markdown": "All green."}
	first := s.tool(id, sb, "automation.complete", "tc-1", done)
	if first.status != http.StatusOK || first.body["success"] != true {
		t.Fatalf("automation.complete: %d %s", first.status, first.raw)
	}
	alias := s.tool(id, sb, "automation_complete", "tc-2", done)
	if alias.status != http.StatusOK || alias.headers.Get("Idempotent-Replayed") != "true" {
		t.Errorf("alias with the same completion_id: %d %s", alias.status, alias.raw)
	}
	other := s.tool(id, sb, "automation.complete", "tc-3", map[string]any{"run_id": "run-9", "completion_id": "done-2", "outcome": "failed"})
	if other.status != http.StatusOK || other.body["success"] != false || !strings.Contains(other.str("result"), "already completed") {
		t.Errorf("second completion of a run: %d %s", other.status, other.raw)
	}
	wantToolError(t, s.tool(id, sb, "automation.complete", "tc-4", map[string]any{"run_id": "run-9", "outcome": "failed"}), 400, "invalid_request")

	// verify: evidence uploaded through presigned URLs, recorded as outputs.
	up := s.call(http.MethodPost, "/sandbox/"+id+"/uploads", sb, map[string]any{"tool": "verify", "tool_call_id": "call-verify", "files": []any{
		map[string]any{"path": "test-report.txt", "size_bytes": 9, "content_type": "text/plain"},
		map[string]any{"path": "shots/home.png", "size_bytes": 4, "content_type": "image/png"},
	}})
	if up.status != http.StatusOK {
		t.Fatalf("uploads: %d %s", up.status, up.raw)
	}
	for _, u := range up.body["uploads"].([]any) {
		u := u.(map[string]any)
		body := []byte("all green")
		if u["path"] == "shots/home.png" {
			body = []byte("\x89PNG")
		}
		// A URL takes the file it was asked for, not a larger one.
		if status := send(t, u["url"].(string), u["headers"], append(body, '!')); status != http.StatusForbidden {
			t.Errorf("a file longer than asked for: %d, want 403", status)
		}
		put(t, u["url"].(string), u["headers"], body)
	}
	v := s.toolDone(t, id, sb, "verify", "call-verify", map[string]any{"folder": "evidence"})
	if v.status != http.StatusOK || v.body["success"] != true || v.body["data"].(map[string]any)["file_count"] != float64(2) {
		t.Fatalf("verify: %d %s", v.status, v.raw)
	}
	if r := s.toolDone(t, id, sb, "verify", "call-verify-empty", map[string]any{}); r.body["success"] != false {
		t.Errorf("verify without uploads: %s", r.raw)
	}

	// save_snapshot: the archive becomes the configuration's snapshot.
	up = s.call(http.MethodPost, "/sandbox/"+id+"/uploads", sb, map[string]any{"tool": "save_snapshot", "tool_call_id": "call-snap", "files": []any{
		map[string]any{"path": "snapshot.tar.gz", "size_bytes": 11, "content_type": "application/gzip"},
	}})
	if up.status != http.StatusOK {
		t.Fatalf("uploads: %d %s", up.status, up.raw)
	}
	snapFile := up.body["uploads"].([]any)[0].(map[string]any)
	put(t, snapFile["url"].(string), snapFile["headers"], []byte("not-a-tarball"[:11]))
	snap := s.toolDone(t, id, sb, "save_snapshot", "call-snap", map[string]any{"message": "node 20 and postgres"})
	if snap.status != http.StatusOK || snap.body["success"] != true {
		t.Fatalf("save_snapshot: %d %s", snap.status, snap.raw)
	}
	cfg, _ = s.srv.Env.Registry().Configuration(ctx, devserver.DevTenant, "demo-web")
	if cfg.Snapshot == nil || cfg.Snapshot.SizeBytes != 11 || cfg.Snapshot.Message != "node 20 and postgres" || !strings.HasPrefix(cfg.Snapshot.Key, "snapshots/configuration/demo-web/") {
		t.Errorf("configuration snapshot %+v", cfg.Snapshot)
	}
	if rc, obj, err := s.srv.Env.Bucket().Get(ctx, cfg.Snapshot.Key); err != nil || obj.Size != 11 {
		t.Errorf("snapshot object: %+v %v", obj, err)
	} else {
		_ = rc.Close()
	}

	// Outputs are session events.
	var outputs []string
	evs, _ := s.srv.Env.SessionStore().Events(ctx, id, 0, 100)
	for _, e := range evs {
		outputs = append(outputs, e.Type)
	}
	for _, want := range []string{"automation.completed", "output.verification", "output.snapshot"} {
		if !strings.Contains(strings.Join(outputs, " "), want) {
			t.Errorf("no %s event in %v", want, outputs)
		}
	}

	// Who may call: the sandbox of this session, nobody else.
	// Every caller but this session's sandbox is refused alike (agent contract 6.3).
	wantToolError(t, s.tool(id, "", "verify", "a", map[string]any{}), 403, "forbidden")
	wantToolError(t, s.tool(id, sessionTok, "verify", "a", map[string]any{}), 403, "forbidden")
	wantToolError(t, s.tool(id, appKey, "verify", "a", map[string]any{}), 403, "forbidden")
	wantToolError(t, s.tool(id, sb+"x", "verify", "a", map[string]any{}), 403, "forbidden")
	wantToolError(t, s.tool(id, sb, "request_env_variables", "a", map[string]any{"keys": []any{map[string]any{"key": "A"}}}), 400, "invalid_request")
	wantToolError(t, s.tool(id, sb, "delete_everything", "a", map[string]any{}), 404, "not_found")
	wantToolError(t, s.call(http.MethodPost, "/proliferate/"+id+"/tools/verify", sb, `{"tool_call_id":"a","args":{},"extra":1}`), 400, "invalid_request")
	wantToolError(t, s.call(http.MethodPost, "/proliferate/"+id+"/tools/verify", sb, `{"args":{}}`), 400, "invalid_request")
}

// put PUTs body to a presigned URL with the headers its answer gave (a JSON
// object), and fails the test unless it is stored.
func put(t *testing.T, url string, headers any, body []byte) {
	t.Helper()
	if status := send(t, url, headers, body); status != http.StatusOK {
		t.Fatalf("PUT presigned: %d", status)
	}
}

// send PUTs body to a presigned URL with headers (a JSON object) and returns
// the status.
func send(t *testing.T, url string, headers any, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := headers.(map[string]any)
	for k, v := range h {
		req.Header.Set(k, v.(string))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// Setup-only tools are refused outside setup sessions, and a sandbox token works
// only for its own session.
func TestSetupToolsAndTokensAreGated(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	coding := createBody("Fix the bug.")
	coding["configuration_id"] = "demo-web"
	coding["client_type"] = "automation"
	id, _, sb, spec := s.readySandbox(t, coding)
	if spec.str("session_type") != "coding" || spec.str("prompt_mode") != "automation" || !strings.Contains(spec.str("system_prompt"), "automation.complete") {
		t.Errorf("spec of an automation session: %s", spec.raw)
	}
	cmds := map[string]any{"commands": []any{map[string]any{"name": "web", "command": "npm start"}}}
	wantToolError(t, s.tool(id, sb, "save_service_commands", "c1", cmds), 403, "forbidden")
	wantToolError(t, s.tool(id, sb, "save_env_files", "c2", map[string]any{"files": []any{map[string]any{"path": ".env", "format": "dotenv", "mode": "secret", "keys": []any{map[string]any{"key": "A", "required": true}}}}}), 403, "forbidden")
	// A snapshot outside setup is the session's.
	snapUp := s.call(http.MethodPost, "/sandbox/"+id+"/uploads", sb, map[string]any{"tool": "save_snapshot", "tool_call_id": "snap", "files": []any{map[string]any{"path": "snapshot.tar.gz", "size_bytes": 3}}})
	snapFile := snapUp.body["uploads"].([]any)[0].(map[string]any)
	put(t, snapFile["url"].(string), snapFile["headers"], []byte("abc"))
	if r := s.toolDone(t, id, sb, "save_snapshot", "snap", map[string]any{}); r.body["data"].(map[string]any)["target"] != "session" {
		t.Errorf("snapshot of a coding session: %s", r.raw)
	}
	if got, _ := s.srv.Env.SessionStore().Get(t.Context(), id); !strings.HasPrefix(got.SnapshotKey, "snapshots/session/"+id+"/") {
		t.Errorf("session snapshot key %q", got.SnapshotKey)
	}

	// A second session's sandbox token is refused on the first.
	id2, _, sb2, _ := s.readySecond(t, id)
	wantToolError(t, s.tool(id, sb2, "verify", "x", map[string]any{}), 403, "forbidden")
	wantToolError(t, s.tool(id2, sb, "verify", "x", map[string]any{}), 403, "forbidden")

	// Bad uploads are refused.
	for _, bad := range []map[string]any{
		{"tool": "verify", "tool_call_id": "u", "files": []any{map[string]any{"path": "../escape", "size_bytes": 1}}},
		{"tool": "verify", "tool_call_id": "u", "files": []any{map[string]any{"path": "/abs", "size_bytes": 1}}},
		{"tool": "verify", "tool_call_id": "u", "files": []any{map[string]any{"path": "big", "size_bytes": 200 << 20}}},
		{"tool": "save_snapshot", "tool_call_id": "u", "files": []any{map[string]any{"path": "other.tar", "size_bytes": 1}}},
		{"tool": "automation.complete", "tool_call_id": "u", "files": []any{map[string]any{"path": "a", "size_bytes": 1}}},
		{"tool": "verify", "tool_call_id": "u", "files": []any{}},
	} {
		wantError(t, s.call(http.MethodPost, "/sandbox/"+id+"/uploads", sb, bad), 400, "invalid_request")
	}

	// Create refuses what a setup session needs but lacks.
	bad := createBody("x")
	bad["session_type"] = "setup"
	wantError(t, s.create(bad), 400, "invalid_request")
	bad["configuration_id"] = "no-such-configuration"
	wantError(t, s.create(bad), 404, "not_found")
}

// readySecond readies another session's fake sandbox, next to skip.
func (s *stack) readySecond(t *testing.T, skip string) (string, string, string, reply) {
	t.Helper()
	created := make(chan reply, 1)
	go func() { created <- s.create(createBody("Second")) }()
	id := s.firstSandboxExcept(t, map[string]bool{skip: true})
	sb := s.sandboxToken(t, id)
	spec := s.call(http.MethodGet, "/sandbox/"+id+"/spec", sb, nil)
	if spec.str("prompt_mode") != "scratch" {
		t.Errorf("a session without configuration is scratch: %s", spec.raw)
	}
	hash := spec.body["guardrails"].(map[string]any)["hash"].(string)
	s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "ready", "guardrails_hash": hash})
	r := <-created
	return id, r.str("session_token"), sb, spec
}

// A real agent, scripted, uses the contract tools: verify and save_snapshot
// round-trip through uploads and callbacks, setup-only tools do not exist in a
// coding session, and env values the user submits reach its env file.
func TestAgentUsesContractTools(t *testing.T) {
	t.Parallel()
	steps := []map[string]any{
		{"text": "Writing evidence.", "tool_calls": []any{map[string]any{"name": "write", "args": map[string]any{"path": ".proliferate/.verification/report.txt", "content": "42 tests passed"}}}},
		{"text": "Verifying.", "tool_calls": []any{map[string]any{"name": "verify", "args": map[string]any{}}}},
		{"text": "Saving.", "tool_calls": []any{map[string]any{"name": "save_snapshot", "args": map[string]any{"message": "tests pass"}}}},
		{"text": "Trying a setup tool.", "tool_calls": []any{map[string]any{"name": "save_service_commands", "args": map[string]any{"commands": []any{map[string]any{"name": "a", "command": "b"}}}}}},
		{"text": "I need a key.", "tool_calls": []any{map[string]any{"name": "request_env_variables", "args": map[string]any{"keys": []any{map[string]any{"key": "STRIPE_KEY", "type": "secret"}}}}}},
		{"text": "Waiting for the key."},
	}
	var script bytes.Buffer
	for _, st := range steps {
		line, _ := json.Marshal(st)
		script.Write(append(line, '\n'))
	}
	path := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(path, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+path, "RA_NO_TMUX=1"))
	body := createBody("Prove the tests pass.")
	body["configuration_id"] = "demo-web"
	r := s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id, tok := r.str("agent_id"), r.str("session_token")
	calls := map[string]session.Event{}
	eventually(t, 30*time.Second, "the scripted tool calls", func() bool {
		evs, _ := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
		for _, e := range evs {
			if e.Type == "tool.call" {
				calls[e.Data["tool"].(string)] = e
			}
		}
		return len(calls) == 5
	})
	for _, name := range []string{"write", "verify", "save_snapshot", "request_env_variables"} {
		if calls[name].Data["is_error"] != false {
			t.Errorf("%s failed: %+v", name, calls[name].Data)
		}
	}
	if out, _ := calls["verify"].Data["output"].(string); !strings.Contains(out, "1 verification file") {
		t.Errorf("verify output %q", out)
	}
	if out, _ := calls["save_service_commands"].Data["output"].(string); calls["save_service_commands"].Data["is_error"] != true || !strings.Contains(out, "unknown tool") {
		t.Errorf("a setup-only tool is registered in a coding session: %+v", calls["save_service_commands"].Data)
	}
	got, _ := s.srv.Env.SessionStore().Get(t.Context(), id)
	if !strings.HasPrefix(got.SnapshotKey, "snapshots/session/"+id+"/") {
		t.Errorf("snapshot key %q", got.SnapshotKey)
	}

	// The user answers the env request; the value lands in the sandbox's env file.
	eventually(t, 10*time.Second, "agent idle", func() bool { return s.alive(id, tok).str("state") == "idle" })
	wantError(t, s.call(http.MethodPost, "/api/remote_agents/"+id+"/env", tok, map[string]any{"values": map[string]string{"not a key": "x"}}), 400, "invalid_request")
	wantError(t, s.call(http.MethodPost, "/api/remote_agents/"+id+"/env", "", map[string]any{"values": map[string]string{"A": "x"}}), 401, "missing_token")
	sub := s.call(http.MethodPost, "/api/remote_agents/"+id+"/env", tok, map[string]any{"values": map[string]string{"STRIPE_KEY": "sk_test_123"}})
	if sub.status != http.StatusOK || sub.str("status") != "submitted" {
		t.Fatalf("submit env: %d %s", sub.status, sub.raw)
	}
	// Outside the workspace, in the sandbox's private folder (local sandboxes
	// share /tmp).
	envFile := filepath.Join(s.work, "sandboxes", id+"-1.tmp", ".proliferate_env.json")
	var env map[string]string
	eventually(t, 10*time.Second, "env file written", func() bool {
		raw, err := os.ReadFile(envFile)
		return err == nil && json.Unmarshal(raw, &env) == nil && env["STRIPE_KEY"] == "sk_test_123"
	})
	if info, err := os.Stat(envFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("env file mode %v %v", info.Mode(), err)
	}
	evs, _ := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 200)
	for _, e := range evs {
		if raw, _ := json.Marshal(e.Data); strings.Contains(string(raw), "sk_test_123") {
			t.Errorf("a submitted value is in the events: %s %s", e.Type, raw)
		}
	}
}

// A real agent, scripted, of a type whose tools are read and grep: the spec
// its sandbox fetches names them, and its call of bash is answered with the
// spec's words, never run.
func TestAgentTypesToolsBoundTheAgent(t *testing.T) {
	t.Parallel()
	steps := []map[string]any{
		{"text": "Running a command.", "tool_calls": []any{map[string]any{"name": "bash", "args": map[string]any{"command": "touch ran"}}}},
		{"text": "Reading instead.", "tool_calls": []any{map[string]any{"name": "ls", "args": map[string]any{}}}},
		{"text": "Done."},
	}
	var script bytes.Buffer
	for _, st := range steps {
		line, _ := json.Marshal(st)
		script.Write(append(line, '\n'))
	}
	path := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(path, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+path, "RA_NO_TMUX=1"))
	if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "reader", "name": "Reader",
		"workspace_config": map[string]any{"enabled": true, "tools": []string{"read", "grep"}}}); r.status != http.StatusCreated {
		t.Fatalf("create type: %d %s", r.status, r.raw)
	}
	body := createBody("Look around.")
	body["agent_type"] = "reader"
	r := s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.str("agent_id")
	calls := map[string]session.Event{}
	eventually(t, 30*time.Second, "the scripted tool calls", func() bool {
		evs, _ := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
		for _, e := range evs {
			if e.Type == "tool.call" {
				calls[e.Data["tool"].(string)] = e
			}
		}
		return len(calls) == 2
	})
	for name, want := range map[string]string{"bash": "Tool 'bash' is not enabled for this agent type", "ls": "Tool 'ls' is not enabled for this agent type"} {
		if calls[name].Data["is_error"] != true || calls[name].Data["output"] != want {
			t.Errorf("%s: %+v, want the failure %q", name, calls[name].Data, want)
		}
	}
}
