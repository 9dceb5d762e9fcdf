package systemtest_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// archiveOf is a gzipped tar of entries: name → content, "->target" for a
// link, "/" ending a name for a folder.
func archiveOf(t *testing.T, entries [][2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		name, body := e[0], e[1]
		h := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body))}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case strings.HasPrefix(body, "->"):
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, strings.TrimPrefix(body, "->"), 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// saveSnapshot uploads archive as save_snapshot call callID of session id
// (its sandbox token sb) and calls the tool through the callback route.
func (s *stack) saveSnapshot(t *testing.T, id, sb, callID string, archive []byte) {
	t.Helper()
	up := s.call(http.MethodPost, "/sandbox/"+id+"/uploads", sb, map[string]any{"tool": "save_snapshot", "tool_call_id": callID, "files": []any{
		map[string]any{"path": "snapshot.tar.gz", "size_bytes": len(archive), "content_type": "application/gzip"},
	}})
	if up.status != http.StatusOK {
		t.Fatalf("uploads: %d %s", up.status, up.raw)
	}
	file := up.body["uploads"].([]any)[0].(map[string]any)
	put(t, file["url"].(string), file["headers"], archive)
	if r := s.toolDone(t, id, sb, "save_snapshot", callID, map[string]any{"message": callID}); r.status != http.StatusOK || r.body["success"] != true {
		t.Fatalf("save_snapshot: %d %s", r.status, r.raw)
	}
}

// A setup session saves a snapshot, service commands and env files
// through the tool callback route, and a user persists a value for its
// configuration. A new session of the configuration, a real sandbox, has
// before ready, in order: the snapshot's files in its workspace, the env
// file with the persisted value (0600), and the service running in its
// folder with the value in its environment; each phase an event, no value
// in any. A hostile snapshot saved next is refused: the next session is
// ready, its workspace with a warning, nothing written outside it.
func TestSavedConfigurationComesBack(t *testing.T) {
	t.Parallel()
	// Sessions are fake sandboxes (the test acts as their sandbox) until
	// the flag file exists; then real agents.
	flag := filepath.Join(t.TempDir(), "real")
	s := start(t, withSandbox("/bin/sh", "-c", `if [ -e `+flag+` ]; then exec `+agentBin()+` sandbox; fi; echo "$RA_BOOTSTRAP_CODE" > code; exec sleep 60`),
		withSandboxEnv("RA_NO_TMUX=1"), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 25 * time.Second }))
	setup, setupTok, sb, _ := s.readySandbox(t, setupBody())

	s.saveSnapshot(t, setup, sb, "snap-1", archiveOf(t, [][2]string{
		{"app/", ""}, {"app/index.html", "restored page\n"}, {"current", "->app"}, {"notes/todo.txt", "restore me\n"},
	}))
	cmds := map[string]any{"commands": []any{map[string]any{"name": "web", "workspacePath": "app",
		"command": `printf '%s|%s' "$(basename "$PWD")" "$DATABASE_URL" > ../service.out; exec sleep 20`}}}
	if r := s.tool(setup, sb, "save_service_commands", "cmds-1", cmds); r.status != http.StatusOK || r.body["success"] != true {
		t.Fatalf("save_service_commands: %d %s", r.status, r.raw)
	}
	files := map[string]any{"files": []any{map[string]any{"path": ".env", "workspacePath": "app", "format": "dotenv", "mode": "secret",
		"keys": []any{map[string]any{"key": "DATABASE_URL", "required": true}, map[string]any{"key": "OPTIONAL_KEY", "required": false}}}}}
	if r := s.tool(setup, sb, "save_env_files", "env-1", files); r.status != http.StatusOK || r.body["success"] != true {
		t.Fatalf("save_env_files: %d %s", r.status, r.raw)
	}
	const secret = `postgres://app:s3cr3t "pw"@db/x`
	if r := s.call(http.MethodPost, "/api/remote_agents/"+setup+"/env", setupTok, map[string]any{
		"secrets": []any{map[string]any{"key": "DATABASE_URL", "value": secret, "persist": true}}}); r.status != http.StatusOK {
		t.Fatalf("submit env: %d %s", r.status, r.raw)
	}

	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	body := createBody("Hello")
	body["configuration_id"] = "demo-web"
	r := s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	if ws, _ := r.body["workspace"].(map[string]any); ws["status"] != "ready" {
		t.Errorf("create's workspace = %v", r.body["workspace"])
	}
	id := r.str("agent_id")
	ws := s.workspaceOf(id)
	// All of it is there at ready, before the agent's first word.
	for name, want := range map[string]string{"app/index.html": "restored page\n", "current/index.html": "restored page\n", "notes/todo.txt": "restore me\n",
		"app/.env": "DATABASE_URL=\"postgres://app:s3cr3t \\\"pw\\\"@db/x\"\n"} {
		got, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil || !strings.HasSuffix(string(got), want) {
			t.Errorf("%s = %q (%v), want %q", name, got, err, want)
		}
	}
	if info, err := os.Stat(filepath.Join(ws, "app", ".env")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("env file mode: %v %v", info, err)
	}
	eventually(t, 20*time.Second, "the service ran", func() bool {
		got, _ := os.ReadFile(filepath.Join(ws, "service.out"))
		return string(got) == "app|"+secret
	})
	types, evs := s.workspaceEvents(t, id)
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceRestoring, sandboxwire.TypeWorkspaceEnvFiles,
		sandboxwire.TypeWorkspaceServices, sandboxwire.TypeWorkspaceReady}
	if !slices.Equal(types, want) {
		t.Errorf("workspace events = %v, want %v", types, want)
	}
	first := slices.IndexFunc(evs, func(e session.Event) bool { return e.Type == sandboxwire.TypeAgentMessage })
	ready := slices.IndexFunc(evs, func(e session.Event) bool { return e.Type == sandboxwire.TypeWorkspaceReady })
	if first >= 0 && first < ready {
		t.Errorf("the agent spoke before its workspace was ready")
	}
	for _, e := range evs {
		raw, _ := json.Marshal(e.Data)
		if strings.Contains(string(raw), "s3cr3t") {
			t.Errorf("a value is in event %s: %s", e.Type, raw)
		}
		if e.Type == sandboxwire.TypeWorkspaceEnvFiles && !strings.Contains(string(raw), `"keys":["DATABASE_URL","OPTIONAL_KEY"]`) {
			t.Errorf("env_files event: %s", raw)
		}
		if e.Type == sandboxwire.TypeWorkspaceServices && !strings.Contains(string(raw), `"name":"web"`) {
			t.Errorf("services event: %s", raw)
		}
	}

	// A hostile snapshot: refused, a warning of the workspace, not a failure.
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	s.saveSnapshot(t, setup, sb, "snap-2", archiveOf(t, [][2]string{
		{"innocent.txt", "x"}, {"../escape.txt", "out"}, {"/tmp/abs-escape.txt", "out"}, {"link", "->../../.."},
	}))
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	body["initial_prompt"] = "Again"
	r = s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	wsBody, _ := r.body["workspace"].(map[string]any)
	warnings, _ := wsBody["warnings"].([]any)
	if wsBody["status"] != "ready" || len(warnings) != 1 || !strings.Contains(warnings[0].(string), "the snapshot was not restored: the archive was refused") {
		t.Errorf("create's workspace = %v", r.body["workspace"])
	}
	id3 := r.str("agent_id")
	for _, p := range []string{filepath.Join(s.workspaceOf(id3), "innocent.txt"), filepath.Join(filepath.Dir(s.workspaceOf(id3)), "escape.txt"), "/tmp/abs-escape.txt"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s was written: %v", p, err)
		}
	}
	types, _ = s.workspaceEvents(t, id3)
	want = []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceRestoring, sandboxwire.TypeWorkspaceWarning,
		sandboxwire.TypeWorkspaceEnvFiles, sandboxwire.TypeWorkspaceServices, sandboxwire.TypeWorkspaceReady}
	if !slices.Equal(types, want) {
		t.Errorf("workspace events = %v, want %v", types, want)
	}
	if a := s.alive(id3, r.str("session_token")); a.str("state") == "failed" {
		t.Errorf("a refused snapshot failed the session: %s", a.raw)
	}
	// No value in the logs, the server's or the sandboxes'.
	logs, _ := filepath.Glob(filepath.Join(s.work, "sandboxes", "*.log"))
	texts := []string{s.logs.String()}
	for _, l := range logs {
		raw, _ := os.ReadFile(l)
		texts = append(texts, string(raw))
	}
	for _, text := range texts {
		if strings.Contains(text, "s3cr3t") {
			t.Errorf("a log holds the persisted value")
		}
	}
}

// In tmux, each saved service gets a window of the agent's session named
// after it, showing its output, while the service runs as a process of its
// own; the agent's own window stays the one its supervisor watches, so a
// shutdown still ends the session and its windows.
func TestSavedServicesGetTmuxWindows(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: .ci/run installs it")
	}
	flag := filepath.Join(t.TempDir(), "real")
	s := start(t, withSandbox("/bin/sh", "-c", `if [ -e `+flag+` ]; then exec `+agentBin()+` sandbox; fi; echo "$RA_BOOTSTRAP_CODE" > code; exec sleep 60`),
		withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 25 * time.Second }))
	setup, _, sb, _ := s.readySandbox(t, setupBody())
	cmds := map[string]any{"commands": []any{map[string]any{"name": "api", "command": `echo serving; touch api.started; exec sleep 20`}}}
	if r := s.tool(setup, sb, "save_service_commands", "cmds-1", cmds); r.status != http.StatusOK || r.body["success"] != true {
		t.Fatalf("save_service_commands: %d %s", r.status, r.raw)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	body := createBody("Hello")
	body["configuration_id"] = "demo-web"
	r := s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id, name := r.str("agent_id"), r.str("tmux_session_name")
	eventually(t, 20*time.Second, "the service ran", func() bool {
		_, err := os.Stat(filepath.Join(s.workspaceOf(id), "api.started"))
		return err == nil
	})
	out, err := exec.Command("tmux", "-L", name, "list-windows", "-t", "="+name, "-F", "#{window_index}:#{window_name}").Output()
	if err != nil || !strings.Contains(string(out), "0:") || !strings.Contains(string(out), ":api\n") {
		t.Errorf("tmux windows %q (%v), want the agent's and the service's", out, err)
	}
	// The service's window shows its output.
	eventually(t, 20*time.Second, "the service's window shows its output", func() bool {
		pane, err := exec.Command("tmux", "-L", name, "capture-pane", "-p", "-t", "="+name+":api").Output()
		return err == nil && strings.Contains(string(pane), "serving")
	})
	has := func() bool { return exec.Command("tmux", "-L", name, "has-session", "-t", "="+name).Run() == nil }
	if sd := s.shutdown(id, r.str("session_token")); sd.str("status") != "shutdown_initiated" {
		t.Fatalf("shutdown: %s", sd.raw)
	}
	eventually(t, 15*time.Second, "tmux session gone", func() bool { return !has() })
}
