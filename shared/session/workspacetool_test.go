package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
	"github.com/remote-agents/remote-agents/shared/token"
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
		err := session.CheckWorkspaceTool(session.Session{Blueprint: session.Blueprint{Workspace: tt.ws}, State: tt.state}, tt.tool)
		if got := apierror.CodeOf(err); got != tt.want || (err != nil && got == "") {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	err := session.CheckWorkspaceTool(session.Session{Blueprint: session.Blueprint{Workspace: typed}, State: session.Idle}, "bash")
	var e *apierror.Error
	if !errors.As(err, &e) || e.Message != "Tool 'bash' is not enabled for this agent type" {
		t.Errorf("not enabled: %v", err)
	}
}

// results is a map of ToolResults (first write wins), for the logic tests.
type results struct {
	mu sync.Mutex
	m  map[string]session.ToolResultRecord
}

func (r *results) Record(_ context.Context, rec session.ToolResultRecord) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[rec.Key]; ok {
		return false, nil
	}
	r.m[rec.Key] = rec
	return true, nil
}

func (r *results) Result(_ context.Context, key string) (session.ToolResultRecord, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.m[key]
	if !ok {
		return rec, session.ErrNotFound
	}
	return rec, nil
}

// A request not done within ToolWait is pending; the sandbox reads it from
// its inbox until its result is recorded, once; the same request id then
// replays the result, and with other arguments is refused.
func TestWorkspaceToolPendingThenReplayed(t *testing.T) {
	t.Parallel()
	store := storetest.NewMemory()
	res := &results{m: map[string]session.ToolResultRecord{}}
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { // each look at the clock is 5 s later
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(5 * time.Second)
		return now
	}
	tok, hash := token.New(token.Sandbox)
	sess := session.Session{ID: uuid.NewString(), Blueprint: session.Blueprint{PersonaSlug: "helper"}, State: session.Idle, Generation: 1, SandboxTokenHash: hash, CreatedAt: now, UpdatedAt: now}
	if err := store.Create(t.Context(), sess, nil); err != nil {
		t.Fatal(err)
	}
	svc := session.NewWorkspaceTools(session.WorkspaceToolsOptions{Store: store, ToolResults: res, Now: clock})
	ch := sandboxchannel.New(sandboxchannel.Options{Store: store, ToolResults: res, Now: clock})
	args := session.WorkspaceToolRequest{Args: json.RawMessage(`{ "command": "make" }`)}

	out, err := svc.RunWorkspaceTool(t.Context(), sess, "bash", "build-1", args)
	if err != nil || out.Pending == nil || out.Pending.RequestID != "build-1" || out.Pending.Status != "pending" {
		t.Fatalf("first: %+v %v", out, err)
	}
	inbox, err := ch.Inbox(t.Context(), sess.ID, tok, 0)
	if err != nil || len(inbox.ToolRequests) != 1 || string(inbox.ToolRequests[0].Args) != `{"command":"make"}` || inbox.ToolRequests[0].Tool != "bash" {
		t.Fatalf("inbox: %+v %v", inbox, err)
	}
	for _, bad := range []sandboxwire.ToolResult{
		{RequestID: "build-2", Tool: "bash", Output: "x"},
		{RequestID: "build-1", Tool: "read", Output: "x"},
		{RequestID: "build-1", Tool: "bash", Output: strings.Repeat("x", sandboxwire.MaxToolOutputBytes+1)},
	} {
		if _, err := ch.ToolResult(t.Context(), sess, bad); apierror.CodeOf(err) != apierror.InvalidRequest {
			t.Errorf("result %s/%s (%d bytes): %v", bad.RequestID, bad.Tool, len(bad.Output), err)
		}
	}
	for i, want := range []bool{true, false} {
		got, err := ch.ToolResult(t.Context(), sess, sandboxwire.ToolResult{RequestID: "build-1", Tool: "bash", Output: fmt.Sprint("built ", i), Args: `{"command":"make"}`})
		if err != nil || got.Recorded != want {
			t.Errorf("result %d: %+v %v, want recorded %v", i, got, err, want)
		}
	}
	if inbox, err := ch.Inbox(t.Context(), sess.ID, tok, 0); err != nil || len(inbox.ToolRequests) != 0 {
		t.Errorf("a request with a result is read again: %+v %v", inbox, err)
	}
	out, err = svc.RunWorkspaceTool(t.Context(), sess, "bash", "build-1", session.WorkspaceToolRequest{Args: json.RawMessage(`{"command":"make"}`)})
	if err != nil || out.Result == nil || out.Result.Output != "built 0" || !out.Result.Replayed {
		t.Errorf("replay: %+v %v", out, err)
	}
	if _, err := svc.RunWorkspaceTool(t.Context(), sess, "bash", "build-1", session.WorkspaceToolRequest{Args: json.RawMessage(`{"command":"rm -rf ."}`)}); apierror.CodeOf(err) != apierror.IdempotencyKeyReused {
		t.Errorf("other arguments: %v", err)
	}
	evs, err := store.Events(t.Context(), sess.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if want := []string{sandboxwire.TypeWorkspaceToolRequest, sandboxwire.TypeWorkspaceTool}; !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
	for name, raw := range map[string]string{"a string": `"x"`, "an array": `[1]`, "not JSON": `{`, "too large": `{"a":"` + strings.Repeat("a", sandboxwire.MaxToolArgsBytes) + `"}`} {
		if _, err := svc.RunWorkspaceTool(t.Context(), sess, "bash", "", session.WorkspaceToolRequest{Args: json.RawMessage(raw)}); apierror.CodeOf(err) != apierror.InvalidRequest {
			t.Errorf("args %s: %v", name, err)
		}
	}
}
