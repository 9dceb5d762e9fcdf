// Package contract registers the platform's contract tools (package toolspec) in
// the agent's tool registry, inside a sandbox:
//
//   - verify uploads the evidence folder through presigned URLs, then calls back;
//   - save_snapshot archives the workspace, uploads it, then calls back;
//   - automation_complete (automation.complete), save_service_commands and
//     save_env_files call back with their arguments;
//   - request_env_variables asks the user through an event and returns at once.
//
// Setup-only tools are registered only in setup sessions; the gateway refuses
// them elsewhere too. The model sees the schemas of toolspec, unchanged.
package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/remote-agents/remote-agents/sandbox/callback"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Channel is the sandbox channel the tools need besides the callbacks.
type Channel interface {
	// Uploads returns presigned URLs for a call's files.
	Uploads(ctx context.Context, in sandboxwire.UploadsRequest) (sandboxwire.UploadsResponse, error)
	// Emit appends an event to the session.
	Emit(ctx context.Context, p sandboxwire.Payload) error
}

// Options configure the contract tools.
type Options struct {
	Callback *callback.Client
	Channel  Channel
	// Setup registers the setup-only tools.
	Setup bool
	// EnvFile is where submitted env values are written (shown to the model).
	EnvFile string
	// Private lists workspace-relative paths (files or folders) that are the
	// session's, not the workspace's: save_snapshot leaves them out, with the
	// agent's state folder (.agent) and EnvFile. A sandbox lists its
	// conversation and the user's attachments.
	Private []string
	// Uploader PUTs files to presigned URLs; nil uses a plain HTTP client.
	Uploader *Uploader
}

// ModelName is the name the model sees for a tool: model APIs allow no '.' in
// tool names, so automation.complete is offered as automation_complete, the name
// the gateway also accepts.
func ModelName(name string) string {
	if name == toolspec.AutomationComplete {
		return toolspec.AutomationCompleteAlias
	}
	return name
}

// Register adds the contract tools the session gets to r.
func Register(r *tools.Registry, p *policy.Policy, o Options) error {
	if o.Uploader == nil {
		o.Uploader = &Uploader{}
	}
	for _, d := range toolspec.ForSession(o.Setup) {
		run, err := o.runner(d, p)
		if err != nil {
			return err
		}
		if err := r.Register(tools.Tool{Name: ModelName(d.Name), Description: d.Description, Schema: d.Schema, Run: run}); err != nil {
			return err
		}
	}
	return nil
}

type runFunc = func(ctx context.Context, args json.RawMessage) (string, error)

func (o Options) runner(d toolspec.Def, p *policy.Policy) (runFunc, error) {
	name := d.Name
	parse := func(ctx context.Context, raw json.RawMessage) (any, string, error) {
		args, err := toolspec.Parse(name, raw)
		if err != nil {
			return nil, "", err
		}
		id := tools.CallID(ctx)
		if id == "" {
			return nil, "", errors.New("the tool call has no id")
		}
		return args, id, nil
	}
	switch name {
	case toolspec.RequestEnvVariables:
		return func(ctx context.Context, raw json.RawMessage) (string, error) {
			args, id, err := parse(ctx, raw)
			if err != nil {
				return "", err
			}
			return o.requestEnv(ctx, id, args.(toolspec.RequestEnvArgs))
		}, nil
	case toolspec.Verify:
		return func(ctx context.Context, raw json.RawMessage) (string, error) {
			args, id, err := parse(ctx, raw)
			if err != nil {
				return "", err
			}
			a := args.(toolspec.VerifyArgs)
			n, err := o.uploadFolder(ctx, p, id, a.Folder)
			if err != nil {
				return "", err
			}
			if n == 0 {
				return "", fmt.Errorf("%s has no files to upload; put the evidence there first", a.Folder)
			}
			return answer(o.Callback.Call(ctx, name, id, a))
		}, nil
	case toolspec.SaveSnapshot:
		return func(ctx context.Context, raw json.RawMessage) (string, error) {
			args, id, err := parse(ctx, raw)
			if err != nil {
				return "", err
			}
			if err := o.uploadSnapshot(ctx, p, id); err != nil {
				return "", err
			}
			return answer(o.Callback.Call(ctx, name, id, args))
		}, nil
	case toolspec.AutomationComplete:
		return func(ctx context.Context, raw json.RawMessage) (string, error) {
			args, _, err := parse(ctx, raw)
			if err != nil {
				return "", err
			}
			a := args.(toolspec.CompleteArgs)
			// The contract's idempotency key of a completion is its completion_id.
			return answer(o.Callback.Call(ctx, name, a.CompletionID, a))
		}, nil
	case toolspec.SaveServiceCommands, toolspec.SaveEnvFiles:
		return func(ctx context.Context, raw json.RawMessage) (string, error) {
			args, id, err := parse(ctx, raw)
			if err != nil {
				return "", err
			}
			return answer(o.Callback.Call(ctx, name, id, args))
		}, nil
	}
	return nil, fmt.Errorf("contract tool %s has no runner", name)
}

// answer hands the model the gateway's result text; a failure is a tool error.
func answer(r callback.Result) (string, error) {
	if !r.Success {
		return "", errors.New(r.Result)
	}
	return r.Result, nil
}

func (o Options) requestEnv(ctx context.Context, id string, a toolspec.RequestEnvArgs) (string, error) {
	keys := make([]string, 0, len(a.Keys))
	for _, k := range a.Keys {
		keys = append(keys, k.Key)
	}
	if err := o.Channel.Emit(ctx, sandboxwire.EnvRequest{ToolCallID: id, Keys: a.Keys}); err != nil {
		return "", fmt.Errorf("the request could not be shown to the user: %w", err)
	}
	return fmt.Sprintf("Asked the user for %s. The values they submit are written to %s as a JSON object and put in the environment of your commands under their names; use them there (for example $KEY), never print them.",
		strings.Join(keys, ", "), o.EnvFile), nil
}
