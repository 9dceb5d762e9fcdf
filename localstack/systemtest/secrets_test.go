package systemtest_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// A sandbox token (rsb_) or bootstrap code (rbc_) in any text: 256 random
// bits, base64url.
var credential = regexp.MustCompile(`\b(rsb|rbc)_[A-Za-z0-9_-]{43}\b`)

// Issue 13: nothing secret is inside the tools' reach. A real agent, scripted,
// has bash read its environment, /proc/self/environ and its own process's
// /proc/<pid>/environ, ask the gateway with a guessed token, and leave a
// process running; the dev server holds a provider key. Neither the sandbox's
// token nor the key appears in any tool output, event or log, nor in the
// environment of any process of the sandbox, and the agent's own environment
// is out of its commands' reach. Where the test runs as root, the sandbox runs
// its tools as another user (RA_TOOL_USER), as the image's task does.
//
// Not parallel: it sets the dev server's environment.
func TestNothingSecretInTheToolsReach(t *testing.T) {
	const providerKey = "sk-test-ant-api03-NothingSecretInTheToolsReach0123456789"
	t.Setenv("ANTHROPIC_API_KEY", providerKey)
	script := filepath.Join(t.TempDir(), "script.jsonl")
	sandboxEnv := []string{"RA_LLM_SCRIPT=" + script}
	asRoot := os.Geteuid() == 0
	if asRoot {
		sandboxEnv = append(sandboxEnv, "RA_TOOL_USER=nobody")
	}
	s := start(t, withSandboxEnv(sandboxEnv...))
	if asRoot {
		// The tools' user reaches its workspace, as it does /workspace in the
		// image.
		for _, dir := range []string{s.work, filepath.Dir(s.work)} {
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	gw, err := url.Parse(s.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port := gw.Hostname(), gw.Port()
	commands := []string{
		`env`,
		`tr '\0' '\n' < /proc/self/environ`,
		// $PPID is the agent that runs the command.
		`cat /proc/$PPID/environ; echo "agent-environ-exit=$?"; cat /proc/$PPID/mem 2>/dev/null; echo "agent-mem-exit=$?"`,
		// The gateway, asked without curl or wget, with a guessed token.
		`id=${PWD##*/}; exec 3<>/dev/tcp/` + host + `/` + port + ` && printf 'GET /sandbox/%s/spec HTTP/1.0\r\nAuthorization: Bearer rsb_guessed\r\n\r\n' "${id%-1}" >&3 && cat <&3`,
		// A process that outlives the command, for the test to read.
		`sleep 300 </dev/null >/dev/null 2>&1 & echo "child-pid=$!"`,
	}
	var lines []string
	for _, c := range commands {
		step, _ := json.Marshal(map[string]any{"text": "Checking.", "tool_calls": []any{map[string]any{"name": "bash", "args": map[string]any{"command": c}}}})
		lines = append(lines, string(step))
	}
	lines = append(lines, `{"text":"Done."}`)
	if err := os.WriteFile(script, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	id, tok := s.mustCreate()
	var outputs []string
	var evs []session.Event
	eventually(t, 30*time.Second, "the scripted commands", func() bool {
		evs, _ = s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
		outputs = outputs[:0]
		for _, e := range evs {
			if e.Type == "tool.call" {
				out, _ := e.Data["output"].(string)
				outputs = append(outputs, out)
			}
		}
		return len(outputs) == len(commands)
	})
	child := regexp.MustCompile(`child-pid=(\d+)`).FindStringSubmatch(outputs[4])
	if child == nil {
		t.Fatalf("no child pid in %q", outputs[4])
	}
	childPID, _ := strconv.Atoi(child[1])
	t.Cleanup(func() { _ = syscall.Kill(childPID, syscall.SIGKILL) })

	// The commands ran, with a scrubbed environment.
	if !strings.Contains(outputs[0], "PATH=") || !strings.Contains(outputs[0], "WORKSPACE=") {
		t.Errorf("env printed %q", outputs[0])
	}
	for _, name := range []string{"SANDBOX_MCP_AUTH_TOKEN", "RA_BOOTSTRAP_CODE", "ANTHROPIC_API_KEY", "PROLIFERATE_GATEWAY_URL", "PROLIFERATE_SESSION_ID", "RA_LLM_SCRIPT", "AWS_"} {
		for i, out := range outputs[:2] {
			if strings.Contains(out, name) {
				t.Errorf("command %d sees %s:\n%s", i, name, out)
			}
		}
	}
	// The agent's own process is out of reach.
	if !strings.Contains(outputs[2], "agent-environ-exit=1") || !strings.Contains(outputs[2], "agent-mem-exit=1") {
		t.Errorf("a command read the agent's process:\n%s", outputs[2])
	}
	// A guessed token gets nothing.
	if !strings.Contains(outputs[3], " 401 ") || !strings.Contains(outputs[3], "invalid_token") {
		t.Errorf("the gateway asked with a guessed token answered:\n%s", outputs[3])
	}

	// Nothing secret in what the sandbox let out: events, its log, the server's.
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || sess.SandboxTokenHash == "" {
		t.Fatalf("session %+v: %v", sess, err)
	}
	sandboxLog, err := os.ReadFile(filepath.Join(s.work, "sandboxes", id+"-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	rawEvents, _ := json.Marshal(evs)
	for what, text := range map[string]string{"events": string(rawEvents), "sandbox log": string(sandboxLog), "server log": s.logs.String()} {
		if strings.Contains(text, providerKey) {
			t.Errorf("the provider key is in the %s", what)
		}
		if m := credential.FindString(text); m != "" {
			t.Errorf("a sandbox credential (%.8s…) is in the %s", m, what)
		}
	}

	// Nor in the environment of any process of the sandbox: the supervisor,
	// the tmux server, the agent, the command's child. (This test may read
	// the agent's when it runs as root, which the tools' user cannot: see
	// above.)
	procs := sandboxProcesses(t, filepath.Join(s.work, "sandboxes", id+"-1"), "ra-"+id[:8])
	t.Logf("processes of the sandbox: %d", len(procs))
	if len(procs) < 2 {
		t.Errorf("found %d processes of the sandbox, want the agent's and the child's at least", len(procs))
	}
	if _, ok := procs[childPID]; !ok {
		t.Errorf("the command's child %d is not among the sandbox's processes %v", childPID, procs)
	}
	for pid, environ := range procs {
		if environ == "" {
			continue // unreadable to this test: not dumpable
		}
		if strings.Contains(environ, providerKey) {
			t.Errorf("process %d holds the provider key", pid)
		}
		for _, m := range credential.FindAllStringSubmatch(environ, -1) {
			if m[1] == "rsb" {
				t.Errorf("process %d holds a sandbox token", pid)
			}
		}
		if strings.Contains(environ, "SANDBOX_MCP_AUTH_TOKEN=") {
			t.Errorf("process %d has SANDBOX_MCP_AUTH_TOKEN set", pid)
		}
	}
	if environ := procs[childPID]; environ == "" || strings.Contains(environ, "RA_BOOTSTRAP_CODE") || strings.Contains(environ, "PROLIFERATE_") {
		t.Errorf("the command's child's environment: %q", environ)
	}
	if r := s.shutdown(id, tok); r.str("status") != "shutdown_initiated" {
		t.Errorf("shutdown: %s", r.raw)
	}
}

// sandboxProcesses returns the processes of a sandbox, by pid, with their
// environment ("" when this process may not read it): those working in its
// workspace, and its tmux server (whose command line names the session).
func sandboxProcesses(t *testing.T, workspace, tmuxName string) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		cwd, _ := os.Readlink(filepath.Join(dir, "cwd"))
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if cwd != workspace && !strings.Contains(string(cmdline), tmuxName) {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join(dir, "environ"))
		out[pid] = string(environ)
	}
	if len(out) == 0 {
		t.Logf("no process works in %s", workspace)
	}
	return out
}
