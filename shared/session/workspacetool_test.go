package session_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
)

// CheckWorkspaceTool refuses in the order the route answers: no workspace,
// no such tool, not enabled, the agent over.
func TestCheckWorkspaceTool(t *testing.T) {
	t.Parallel()
	typed := &registry.WorkspaceConfig{Enabled: true, Tools: []string{"read", "grep"}}
	tests := []struct {
		name  string
		ws    *registry.WorkspaceConfig
		state session.State
		tool  string
		want  apierror.Code
	}{
		{"enabled", typed, session.Idle, "read", ""},
		{"no type: every tool", nil, session.Working, "bash", ""},
		{"provisioning: queued", typed, session.Provisioning, "grep", ""},
		{"not enabled", typed, session.Idle, "bash", apierror.ToolNotEnabled},
		{"unknown", typed, session.Idle, "ssh", apierror.ToolNotFound},
		{"a contract tool is none", nil, session.Idle, "verify", apierror.ToolNotFound},
		{"workspace disabled", &registry.WorkspaceConfig{Enabled: false, Tools: []string{"read"}}, session.Idle, "read", apierror.WorkspaceDisabled},
		{"disabled before unknown", &registry.WorkspaceConfig{}, session.Idle, "ssh", apierror.WorkspaceDisabled},
		{"ending", typed, session.Ending, "read", apierror.AgentNotAlive},
		{"ended", nil, session.Ended, "read", apierror.AgentNotAlive},
	}
	for _, tt := range tests {
		err := session.CheckWorkspaceTool(session.Session{Workspace: tt.ws, State: tt.state}, tt.tool)
		if got := apierror.CodeOf(err); got != tt.want || (err != nil && got == "") {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	err := session.CheckWorkspaceTool(session.Session{Workspace: typed, State: session.Idle}, "bash")
	if e, ok := err.(*apierror.Error); !ok || e.Message != "Tool 'bash' is not enabled for this agent type" {
		t.Errorf("not enabled: %v", err)
	}
}
