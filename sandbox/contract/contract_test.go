package contract

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/callback"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

type channel struct{ events []sandboxwire.Payload }

func (c *channel) Uploads(context.Context, sandboxwire.UploadsRequest) (sandboxwire.UploadsResponse, error) {
	return sandboxwire.UploadsResponse{}, nil
}

func (c *channel) Emit(_ context.Context, p sandboxwire.Payload) error {
	c.events = append(c.events, p)
	return nil
}

func registry(t *testing.T, setup bool) (*tools.Registry, *channel) {
	t.Helper()
	p, err := policy.New(policy.Defaults(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := tools.New(p, tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := &channel{}
	if err := Register(r, p, Options{Callback: &callback.Client{Gateway: "http://127.0.0.1:1", SessionID: "s", Token: "t", MaxRetries: -1}, Channel: ch, Setup: setup, EnvFile: "/w/.proliferate_env.json"}); err != nil {
		t.Fatal(err)
	}
	return r, ch
}

func TestSetupOnlyToolsAreRegisteredOnlyInSetupSessions(t *testing.T) {
	coding, _ := registry(t, false)
	setup, _ := registry(t, true)
	has := func(r *tools.Registry, name string) bool {
		for _, d := range r.Definitions() {
			if d.Name == name {
				return true
			}
		}
		return false
	}
	for _, name := range []string{"verify", "save_snapshot", "automation_complete", "request_env_variables"} {
		if !has(coding, name) || !has(setup, name) {
			t.Errorf("%s missing", name)
		}
	}
	for _, name := range []string{"save_service_commands", "save_env_files"} {
		if has(coding, name) || !has(setup, name) {
			t.Errorf("%s: in coding %v, in setup %v", name, has(coding, name), has(setup, name))
		}
	}
	if has(coding, "automation.complete") {
		t.Error("model tool names cannot hold a '.'")
	}
}

func TestRequestEnvVariablesReturnsAtOnce(t *testing.T) {
	r, ch := registry(t, false)
	res, err := r.Run(t.Context(), llm.ToolCall{ID: "call-1", Name: "request_env_variables", Args: json.RawMessage(`{"keys":[{"key":"STRIPE_KEY","type":"secret"}]}`)})
	if err != nil || res.IsError || !strings.Contains(res.Content, "STRIPE_KEY") || !strings.Contains(res.Content, "/w/.proliferate_env.json") {
		t.Fatalf("result %+v %v", res, err)
	}
	if len(ch.events) != 1 || ch.events[0].(sandboxwire.EnvRequest).ToolCallID != "call-1" {
		t.Errorf("events %+v", ch.events)
	}
	bad, _ := r.Run(t.Context(), llm.ToolCall{ID: "call-2", Name: "request_env_variables", Args: json.RawMessage(`{"keys":[{"key":"NOT A KEY"}]}`)})
	if !bad.IsError || len(ch.events) != 1 {
		t.Errorf("an invalid key was requested: %+v", bad)
	}
}

// A gateway tool whose gateway is unreachable answers the model with a failure;
// it does not panic or stop the run.
func TestUnreachableGatewayIsAToolFailure(t *testing.T) {
	r, _ := registry(t, true)
	res, err := r.Run(t.Context(), llm.ToolCall{ID: "c", Name: "save_service_commands", Args: json.RawMessage(`{"commands":[{"name":"web","command":"npm start"}]}`)})
	if err != nil || !res.IsError || !strings.Contains(res.Content, "could not be reached") {
		t.Errorf("result %+v %v", res, err)
	}
	res, _ = r.Run(t.Context(), llm.ToolCall{ID: "c", Name: "verify", Args: json.RawMessage(`{"folder":"nothing-here"}`)})
	if !res.IsError || !strings.Contains(res.Content, "does not exist") {
		t.Errorf("verify of a missing folder: %+v", res)
	}
}
