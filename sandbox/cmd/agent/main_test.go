package main

import (
	"bytes"
	"strings"
	"testing"
)

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
	if code := run([]string{"sandbox"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "PROLIFERATE_GATEWAY_URL, SANDBOX_MCP_AUTH_TOKEN required in a sandbox") {
		t.Errorf("sandbox without identity: exit code %d, stderr %q", code, stderr.String())
	}
}
