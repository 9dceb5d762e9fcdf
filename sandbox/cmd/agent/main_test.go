package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/syncbuf"
	"github.com/remote-agents/remote-agents/sandbox/confine"
)

// TestMain lets the test binary be the agent its tmux supervisor starts (the
// supervisor runs its own executable with "sandbox"), and the helper that
// confines a job's commands (as main does).
func TestMain(m *testing.M) {
	confine.Main()
	if len(os.Args) > 1 && os.Args[1] == "sandbox" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"version", []string{"version"}, 0, "agent dev\n", ""},
		{"help", []string{"help"}, 0, "agent run <Agentfile>", ""},
		{"no command", nil, 2, "", "agent run <Agentfile>"},
		{"unknown", []string{"fly"}, 2, "", `unknown command "fly"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) || (tt.wantStdout == "" && stdout.Len() > 0) {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) || (tt.wantStderr == "" && stderr.Len() > 0) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestRunReadsTheEnvironmentOnce(t *testing.T) {
	t.Setenv("RA_TOKEN_LIMIT", "lots")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "Agentfile"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `RA_TOKEN_LIMIT: want a whole number of at least 0, got "lots"`) {
		t.Errorf("exit code %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"sandbox"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `"level":"ERROR"`) || !strings.Contains(stderr.String(), "RA_TOKEN_LIMIT") {
		t.Errorf("sandbox: exit code %d, stderr %q", code, stderr.String())
	}

	t.Setenv("RA_TOKEN_LIMIT", "")
	t.Setenv("PROLIFERATE_SESSION_ID", "s1")
	t.Setenv("PROLIFERATE_GATEWAY_URL", "")
	t.Setenv("SANDBOX_MCP_AUTH_TOKEN", "")
	stderr.Reset()
	if code := run([]string{"sandbox"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "PROLIFERATE_GATEWAY_URL, RA_BOOTSTRAP_CODE (or SANDBOX_MCP_AUTH_TOKEN) required in a sandbox") {
		t.Errorf("sandbox without identity: exit code %d, stderr %q", code, stderr.String())
	}
}

// Inside tmux, what the agent logs reaches its supervisor's stderr, the
// sandbox's log stream (CloudWatch on Fargate), not only the pane.
func TestAgentInTmuxLogsToTheSupervisorsStream(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: .ci/run installs it")
	}
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"status":401,"error_code":"invalid_token","message":"The sandbox token is not valid.","retryable":false}`))
	}))
	defer gateway.Close()
	name := fmt.Sprintf("ra-main-test-%d", os.Getpid())
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", name, "kill-server").Run() })
	for k, v := range map[string]string{
		"PROLIFERATE_SESSION_ID": "5b1f6d7e-0c2a-4e8b-9f3d-1a2b3c4d5e6f", "PROLIFERATE_GATEWAY_URL": gateway.URL,
		"SANDBOX_MCP_AUTH_TOKEN": "rsb_refused", "RA_WORKSPACE": t.TempDir(), "RA_TMUX_SESSION_NAME": name,
		"RA_NO_TMUX": "", "RA_IN_TMUX": "", "RA_TMUX_SUPERVISOR_PID": "", "RA_TMUX_LOG_PIPE": "", "RA_LLM_PROVIDER": "scripted",
	} {
		t.Setenv(k, v)
	}
	var stdout bytes.Buffer
	var stderr syncbuf.Buffer // written by the supervisor and its log copier
	code := run([]string{"sandbox"}, &stdout, &stderr)
	// The agent, refused by the gateway, logs why and exits 1.
	if code != 1 || !strings.Contains(stderr.String(), `"msg":"sandbox failed"`) || !strings.Contains(stderr.String(), "401") {
		t.Errorf("supervisor: exit %d, stderr %q; want the agent's 1 and its log line", code, stderr.String())
	}
}
