// Package tools is the agent's tool registry and its built-in tools: read, write,
// edit, glob, grep, ls, bash, git, memory_read, memory_write, web_fetch and
// web_search. An agent type may enable only some of them (Options.Enabled): the
// others are not registered, so the model never sees them, and a call to one is
// refused with NotEnabled. Every call's arguments
// are validated against the JSON Schema the model is shown, and every tool goes
// through the security policy. A tool that fails answers the model with what went
// wrong; only a cancelled run is an error.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/remote-agents/remote-agents/sandbox/confine"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/sandbox/workflow"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Tool is one tool.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments, as the model sees it.
	Schema string
	// Run does the work; a returned error is reported to the model as a failure.
	Run func(ctx context.Context, args json.RawMessage) (string, error)
}

// Registry holds the tools a run may use.
type Registry struct {
	tools   map[string]Tool
	schemas map[string]*jsonschema.Schema
	order   []string
	// restricted: the session's agent type names its tools; a call to
	// another workspace tool is refused with NotEnabled (a name that is no
	// workspace tool stays an unknown tool).
	restricted bool
}

var _ workflow.Tools = (*Registry)(nil)

// Options configure the built-in tools.
type Options struct {
	// MemoryPath is the JSON file memory_read and memory_write keep.
	MemoryPath string
	// WebGateway is the Internet Gateway's URL; WebToken its bearer token.
	WebGateway string
	WebToken   string
	// HTTPClient replaces the web tools' client (tests).
	HTTPClient *http.Client
	// Env, if set, gives the environment of every command bash runs (a
	// sandbox's scrubbed one, toolenv.Env.Environ); nil passes the agent's
	// own (agent run on a developer's machine).
	Env func() []string
	// User, if set, is who bash's commands run as, and who is given the files
	// the file tools write (toolenv.User); nil is the agent's own user.
	User *toolenv.User
	// Enabled, if not nil, are the built-in tools to register (an agent
	// type's tools, toolspec.WorkspaceTools names); the policy still has to
	// enable each. Nil registers every built-in the policy enables.
	Enabled []string
	// NoNetwork runs bash's commands in a network namespace of their own
	// (Linux, with CAP_SYS_ADMIN: NetworkIsolation says whether it holds):
	// nothing they run reaches a network.
	NoNetwork bool
	// Confine, if set, runs bash's commands confined to these directories
	// (package confine: Landlock): nothing else of the file system is
	// theirs to read or write.
	Confine *confine.Rules
}

// New registers the built-in tools the policy enables.
func New(p *policy.Policy, o Options) (*Registry, error) {
	r := &Registry{tools: map[string]Tool{}, schemas: map[string]*jsonschema.Schema{}, restricted: o.Enabled != nil}
	builtins := append(fileTools(p, o.User), bashTool(p, o), gitTool(p, o))
	builtins = append(builtins, memoryTools(p, o.MemoryPath)...)
	builtins = append(builtins, webTools(p, o)...)
	for _, t := range builtins {
		if !p.Enabled(t.Name) || (o.Enabled != nil && !slices.Contains(o.Enabled, t.Name)) {
			continue
		}
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds a tool; its schema must compile.
func (r *Registry) Register(t Tool) error {
	sch, err := toolspec.Compile(t.Name, t.Schema)
	if err != nil {
		return err
	}
	if _, dup := r.tools[t.Name]; !dup {
		r.order = append(r.order, t.Name)
	}
	r.tools[t.Name] = t
	r.schemas[t.Name] = sch
	return nil
}

// Names lists the registered tools in registration order.
func (r *Registry) Names() []string { return append([]string(nil), r.order...) }

// Definitions are the tools as the model sees them.
func (r *Registry) Definitions() []llm.Tool {
	defs := make([]llm.Tool, 0, len(r.order))
	for _, name := range r.order {
		t := r.tools[name]
		defs = append(defs, llm.Tool{Name: t.Name, Description: t.Description, Schema: json.RawMessage(t.Schema)})
	}
	return defs
}

// Run validates and runs one call.
func (r *Registry) Run(ctx context.Context, call llm.ToolCall) (workflow.ToolResult, error) {
	if err := ctx.Err(); err != nil {
		return workflow.ToolResult{}, err
	}
	t, ok := r.tools[call.Name]
	if !ok && r.restricted && toolspec.IsWorkspaceTool(call.Name) {
		return workflow.ToolResult{Content: NotEnabled(call.Name), IsError: true}, nil
	}
	if !ok {
		names := append([]string(nil), r.order...)
		sort.Strings(names)
		return failed("unknown tool %q; available tools: %s", call.Name, strings.Join(names, ", ")), nil
	}
	args := call.Args
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return failed("the arguments of %s are not valid JSON", call.Name), nil
	}
	if err := r.schemas[call.Name].Validate(inst); err != nil {
		return failed("invalid arguments for %s: %s", call.Name, toolspec.SchemaError(err)), nil
	}
	out, err := t.Run(context.WithValue(ctx, callIDKey{}, call.ID), args)
	if ctx.Err() != nil {
		return workflow.ToolResult{}, ctx.Err()
	}
	if err != nil {
		return workflow.ToolResult{Content: err.Error(), IsError: true}, nil
	}
	return workflow.ToolResult{Content: out}, nil
}

// maxToolNameInMessage bounds the tool name NotEnabled repeats (the model's).
const maxToolNameInMessage = 100

// NotEnabled is the answer to a call of a tool the session's agent type does
// not enable, e.g. "Tool 'bash' is not enabled for this agent type".
func NotEnabled(name string) string {
	if len(name) > maxToolNameInMessage {
		name = name[:maxToolNameInMessage]
	}
	return fmt.Sprintf("Tool '%s' is not enabled for this agent type", name)
}

type callIDKey struct{}

// CallID is the id the model gave the tool call being run, for tools that need a
// stable key for it (the gateway-mediated tools' idempotency).
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

func failed(format string, args ...any) workflow.ToolResult {
	return workflow.ToolResult{Content: fmt.Sprintf(format, args...), IsError: true}
}

// decode unmarshals validated arguments.
func decode[T any](args json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(args, &v); err != nil {
		return v, fmt.Errorf("arguments: %w", err)
	}
	return v, nil
}
