// Package cli is the agent's command line: run, validate and inspect Agentfiles.
// Events go to stderr, the result to stdout; the exit status is 0 on success, 1
// when a run fails and 2 for a usage or Agentfile error.
package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/agentfile"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/rpc"
	"github.com/remote-agents/remote-agents/sandbox/runlog"
	"github.com/remote-agents/remote-agents/sandbox/telemetry"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/sandbox/workflow"
	"github.com/remote-agents/remote-agents/shared/sanitize"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	usageHeader = `agent runs Agentfile workflows with a language model and tools.

usage:
  agent run <Agentfile> [--input key=value]... [--config agent.json] [--policy policy.toml] [--workspace dir]
  agent validate <Agentfile>
  agent inspect <Agentfile> [--json]
  agent rpc [--config agent.json]   JSON-RPC 2.0 on stdin/stdout: method "run" {file, inputs}
  agent sandbox              run as a remote agent inside a sandbox (identity from RA_* variables)
  agent version
`
)

// Usage is the help text.
const Usage = usageHeader + `
Events are printed to stderr and the final result to stdout. Exit status: 0 done,
1 the run failed, 2 bad usage or an invalid Agentfile.
`

// inputs collects repeated --input key=value flags.
type inputs map[string]string

func (in inputs) String() string { return fmt.Sprint(map[string]string(in)) }

func (in inputs) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || !agentfile.IsIdent(k) {
		return fmt.Errorf("want key=value with key an input name, got %q", v)
	}
	if _, dup := in[k]; dup {
		return fmt.Errorf("input %s given twice", k)
	}
	in[k] = val
	return nil
}

// parse parses flags wherever they stand among the arguments and returns the
// positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// loadArg parses fs over args, which must name one Agentfile, and loads it.
func loadArg(fs *flag.FlagSet, args []string, usage string, stderr io.Writer) (*agentfile.Workflow, string, bool) {
	fs.SetOutput(stderr)
	pos, err := parse(fs, args)
	if err != nil || len(pos) != 1 {
		fmt.Fprintln(stderr, usage)
		return nil, "", false
	}
	wf, err := agentfile.Load(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, "", false
	}
	return wf, pos[0], true
}

// Validate runs `agent validate`.
func Validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	wf, path, ok := loadArg(fs, args, "usage: agent validate <Agentfile>", stderr)
	if !ok {
		return ExitUsage
	}
	fmt.Fprintf(stdout, "%s: workflow %s is valid (%d inputs, %d agents, %d goals, %d steps)\n",
		path, wf.Name, len(wf.Inputs), len(wf.Agents), len(wf.Goals), len(wf.Steps))
	return ExitOK
}

// Inspect runs `agent inspect`.
func Inspect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the structure as JSON")
	wf, _, ok := loadArg(fs, args, "usage: agent inspect <Agentfile> [--json]", stderr)
	if !ok {
		return ExitUsage
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(wf); err != nil {
			fmt.Fprintln(stderr, err)
			return ExitFailed
		}
		return ExitOK
	}
	fmt.Fprintf(stdout, "workflow %s\n", wf.Name)
	if len(wf.Inputs) > 0 {
		fmt.Fprintln(stdout, "\ninputs:")
		for _, in := range wf.Inputs {
			d := "required"
			if in.Default != nil {
				d = "default " + in.Default.Text
				if !in.Default.IsNumber {
					d = fmt.Sprintf("default %q", in.Default.Text)
				}
			}
			fmt.Fprintf(stdout, "  %-16s %s\n", in.Name, d)
		}
	}
	if len(wf.Agents) > 0 {
		fmt.Fprintln(stdout, "\nagents:")
		for _, a := range wf.Agents {
			fmt.Fprintf(stdout, "  %-16s from %s\n", a.Name, a.From)
		}
	}
	fmt.Fprintln(stdout, "\ngoals:")
	for _, g := range wf.Goals {
		src := fmt.Sprintf("%q", sanitize.Clip(oneLine(g.Prompt), 60))
		if g.From != "" {
			src = "from " + g.From
		}
		using := ""
		if len(g.Using) > 0 {
			using = "  using " + strings.Join(g.Using, ", ")
		}
		fmt.Fprintf(stdout, "  %-16s %s%s\n", g.Name, src, using)
	}
	fmt.Fprintln(stdout, "\nsteps:")
	for i, s := range wf.Steps {
		limit := ""
		switch {
		case s.WithinVar != "":
			limit = " within $" + s.WithinVar
		case s.Kind == agentfile.LoopStep:
			limit = fmt.Sprintf(" within %d", s.Within)
		}
		fmt.Fprintf(stdout, "  %d. %-4s %-12s %s%s\n", i+1, s.Kind, s.Name, strings.Join(s.Using, " → "), limit)
	}
	return ExitOK
}

// setupFlags declares the flags run and rpc share; the returned function builds
// the setup from them once the flags are parsed.
func setupFlags(fs *flag.FlagSet, env agentconfig.Env, policyDefault string) func() (*setup, error) {
	configPath := fs.String("config", "", "config file (default ./agent.json if present)")
	policyPath := fs.String("policy", "", "policy file (default "+policyDefault+")")
	workspace := fs.String("workspace", "", "workspace folder (overrides the config)")
	return func() (*setup, error) { return newSetup(env, *configPath, *policyPath, *workspace) }
}

// setup is what run and rpc share: configuration, policy and workspace flags.
type setup struct {
	env        agentconfig.Env
	cfg        agentconfig.Config
	cfgDir     string
	policyPath string
	workspace  string
}

func newSetup(env agentconfig.Env, configPath, policyPath, workspace string) (*setup, error) {
	cfg, cfgDir, err := agentconfig.Load(configPath)
	if err != nil {
		return nil, err
	}
	cfg.LLM.APIKey = env.Key(cfg.LLM)
	ws := cfg.Agent.Workspace
	switch {
	case workspace != "":
		ws = workspace
	case !filepath.IsAbs(ws):
		ws = filepath.Join(cfgDir, ws)
	}
	return &setup{env: env, cfg: cfg, cfgDir: cfgDir, policyPath: policyPath, workspace: ws}, nil
}

// options builds the provider and the tools for a run of the Agentfile at file:
// its policy is --policy, else policy.toml beside the Agentfile, else the defaults.
func (s *setup) options(file string) (workflow.Options, error) {
	provider, err := providers.New(s.cfg.LLM, s.cfgDir)
	if err != nil {
		return workflow.Options{}, err
	}
	var pol *policy.Policy
	if s.policyPath != "" {
		pol, err = policy.Load(s.policyPath, s.workspace)
	} else {
		pol, err = policy.LoadOrDefault(filepath.Join(filepath.Dir(file), policy.FileName), s.workspace)
	}
	if err != nil {
		return workflow.Options{}, err
	}
	registry, err := tools.New(pol, tools.Options{
		MemoryPath: filepath.Join(pol.Workspace(), ".agent", "memory.json"),
		WebGateway: s.cfg.Web.GatewayURL,
		WebToken:   s.env.Secret(s.cfg.Web.GatewayTokenEnv),
	})
	if err != nil {
		return workflow.Options{}, err
	}
	return workflow.Options{Provider: provider, Model: s.cfg.LLM.Model, MaxTokens: s.cfg.LLM.MaxTokens, Tools: registry}, nil
}

// sessions opens the configured session store (its path is relative to the config).
func (s *setup) sessions() (runlog.Store, error) {
	path := s.cfg.Session.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.cfgDir, path)
	}
	if s.cfg.Session.Store == "sqlite" && filepath.Ext(path) == "" {
		path = filepath.Join(path, "sessions.db")
	}
	return runlog.Open(s.cfg.Session.Store, path)
}

// persist records the run in the session: the outputs after each goal (the state
// a resume starts from), every message and every tool call.
func persist(ctx context.Context, store runlog.Store, ses *runlog.Session, opts *workflow.Options, stderr io.Writer) {
	ctx = context.WithoutCancel(ctx)
	opts.Done = ses.Outputs
	warn := func(err error) {
		if err != nil {
			fmt.Fprintln(stderr, "agent: save session:", err)
		}
	}
	opts.OnGoal = func(_ string, outputs map[string]string) error {
		ses.Outputs = outputs
		return store.Update(ctx, *ses)
	}
	opts.OnMessage = func(goal, agent string, m llm.Message) {
		warn(store.AddMessage(ctx, ses.ID, runlog.Message{Goal: goal, Agent: agent, Role: string(m.Role), Content: m.Content, At: time.Now().UTC()}))
	}
	events := opts.OnEvent
	opts.OnEvent = func(e workflow.Event) {
		if e.Type == workflow.ToolCallEvent {
			warn(store.AddToolCall(ctx, ses.ID, runlog.ToolCall{Goal: e.Goal, Agent: e.Agent, Tool: e.Tool, Args: e.Args,
				Result: e.Output, IsError: e.IsError, At: e.Time, Duration: time.Duration(e.Latency * float64(time.Millisecond))}))
		}
		if events != nil {
			events(e)
		}
	}
}

// newSession is a fresh running session of wf with inputs.
func newSession(wf *agentfile.Workflow, inputs map[string]string) runlog.Session {
	return runlog.Session{ID: runlog.NewID(), Workflow: wf.Name, File: wf.File, Inputs: inputs, Status: runlog.Running, Outputs: map[string]string{}}
}

// runSession runs wf in the stored session ses: it persists every goal, message
// and tool call, exports telemetry, and records how the run ended.
func (s *setup) runSession(ctx context.Context, store runlog.Store, ses *runlog.Session, wf *agentfile.Workflow, inputs map[string]string, opts workflow.Options, stderr io.Writer) (workflow.Result, error) {
	persist(ctx, store, ses, &opts, stderr)
	exporter, err := s.telemetry(ses.ID)
	if err != nil {
		return workflow.Result{}, err
	}
	defer func() { _ = exporter.Close(context.WithoutCancel(ctx)) }()
	observe(exporter, ses.ID, wf.Name, &opts)
	res, err := workflow.Run(ctx, wf, inputs, opts)
	ses.Status, ses.Outputs = runlog.Completed, res.Outputs
	if err != nil {
		ses.Status, ses.Error = runlog.Failed, err.Error()
	}
	if uerr := store.Update(context.WithoutCancel(ctx), *ses); uerr != nil {
		fmt.Fprintln(stderr, "agent: save session:", uerr)
	}
	return res, err
}

// telemetry returns the configured exporter (noop unless telemetry.enabled).
func (s *setup) telemetry(sessionID string) (telemetry.Exporter, error) {
	if !s.cfg.Telemetry.Enabled {
		return telemetry.Noop{}, nil
	}
	endpoint := s.cfg.Telemetry.Endpoint
	if s.cfg.Telemetry.Protocol == "file" && !filepath.IsAbs(endpoint) {
		endpoint = filepath.Join(s.cfgDir, endpoint)
	}
	return telemetry.New(s.cfg.Telemetry.Protocol, endpoint, sessionID)
}

// observe exports every message, and every model reply's tokens, latency and
// model, with the session, workflow, goal, agent and loop iteration.
func observe(x telemetry.Exporter, sessionID, workflowName string, opts *workflow.Options) {
	messages := opts.OnMessage
	opts.OnMessage = func(goal, agent string, m llm.Message) {
		x.Export(telemetry.Record{Kind: "message", Time: time.Now().UTC(), SessionID: sessionID, Workflow: workflowName,
			Goal: goal, Agent: agent, Role: string(m.Role), Content: m.Content})
		if messages != nil {
			messages(goal, agent, m)
		}
	}
	events := opts.OnEvent
	opts.OnEvent = func(e workflow.Event) {
		switch e.Type {
		case workflow.ModelReply:
			x.Export(telemetry.Record{Kind: "message", Time: e.Time, SessionID: sessionID, Workflow: workflowName, Goal: e.Goal,
				Agent: e.Agent, Role: "assistant", InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens,
				LatencyMS: e.Latency, Model: e.Model, Iteration: e.Iteration})
		case workflow.ErrorEvent:
			x.Export(telemetry.Record{Kind: "log", Time: e.Time, SessionID: sessionID, Workflow: workflowName, Level: "error",
				Content: e.Message, Fields: map[string]any{"step": e.Step}})
		}
		if events != nil {
			events(e)
		}
	}
}

// RPC runs `agent rpc`: JSON-RPC 2.0 over stdin and stdout. Secrets the
// configuration names are read from env.
func RPC(ctx context.Context, env agentconfig.Env, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rpc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	newSetup := setupFlags(fs, env, "policy.toml beside each Agentfile")
	if pos, err := parse(fs, args); err != nil || len(pos) != 0 {
		fmt.Fprint(stderr, "usage: agent rpc [--config agent.json] [--policy policy.toml] [--workspace dir]\n")
		return ExitUsage
	}
	setup, err := newSetup()
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return ExitUsage
	}
	store, err := setup.sessions()
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return ExitUsage
	}
	defer func() { _ = store.Close() }()
	runner := func(ctx context.Context, wf *agentfile.Workflow, inputs map[string]string, onEvent func(workflow.Event)) (workflow.Result, string, error) {
		opts, err := setup.options(wf.File)
		if err != nil {
			return workflow.Result{}, "", err
		}
		ses := newSession(wf, inputs)
		if err := store.Create(ctx, ses); err != nil {
			return workflow.Result{}, "", err
		}
		opts.OnEvent = onEvent
		res, err := setup.runSession(ctx, store, &ses, wf, inputs, opts, stderr)
		return res, ses.ID, err
	}
	if err := rpc.Serve(ctx, stdin, stdout, runner); err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return ExitFailed
	}
	return ExitOK
}

// Run runs `agent run`. Secrets the configuration names are read from env.
func Run(ctx context.Context, env agentconfig.Env, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	given := inputs{}
	fs.Var(given, "input", "an input as key=value (repeatable)")
	newSetup := setupFlags(fs, env, "policy.toml beside the Agentfile")
	resume := fs.String("resume", "", "resume the session with this id from its last completed goal")
	pos, err := parse(fs, args)
	if err != nil || len(pos) != 1 {
		fmt.Fprint(stderr, "usage: agent run <Agentfile> [--input key=value]... [--config agent.json] [--policy policy.toml] [--workspace dir] [--resume session-id]\n")
		return ExitUsage
	}
	setup, err := newSetup()
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return ExitUsage
	}
	wf, err := agentfile.Load(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitUsage
	}
	store, err := setup.sessions()
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return ExitUsage
	}
	defer func() { _ = store.Close() }()
	var ses runlog.Session
	if *resume != "" {
		if ses, err = store.Get(ctx, *resume); err != nil {
			fmt.Fprintln(stderr, "agent:", err)
			return ExitUsage
		}
		if ses.Workflow != wf.Name {
			fmt.Fprintf(stderr, "agent: session %s ran workflow %s, not %s\n", ses.ID, ses.Workflow, wf.Name)
			return ExitUsage
		}
		for k, v := range ses.Inputs {
			if _, set := given[k]; !set {
				given[k] = v
			}
		}
	}
	bound, err := workflow.BindInputs(wf, given)
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return ExitUsage
	}
	if *resume == "" {
		ses = newSession(wf, bound)
		if err := store.Create(ctx, ses); err != nil {
			fmt.Fprintln(stderr, "agent:", err)
			return ExitFailed
		}
	}
	fmt.Fprintf(stderr, "session %s\n", ses.ID)
	opts, err := setup.options(wf.File)
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return ExitUsage
	}
	if opts.Provider.Name() == "scripted" {
		fmt.Fprintln(stderr, "agent: using the scripted provider: no LLM is configured (set llm.provider in agent.json)")
	}
	opts.OnEvent = printEvent(stderr)
	res, err := setup.runSession(ctx, store, &ses, wf, bound, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "agent: run failed: %v\nresume with: agent run %s --resume %s\n", err, pos[0], ses.ID)
		return ExitFailed
	}
	fmt.Fprintln(stdout, res.Output)
	return ExitOK
}

func printEvent(w io.Writer) func(workflow.Event) {
	return func(e workflow.Event) {
		var line string
		switch e.Type {
		case workflow.WorkflowStarted:
			line = "workflow started"
		case workflow.StepStarted:
			line = "step " + e.Step
		case workflow.LoopIteration:
			line = fmt.Sprintf("  loop %s, iteration %d", e.Step, e.Iteration)
		case workflow.GoalStarted:
			line = "  goal " + e.Goal + " started"
		case workflow.ToolCallEvent:
			status := "ok"
			if e.IsError {
				status = "failed"
			}
			line = fmt.Sprintf("    tool %s %s (%s)", e.Tool, sanitize.Clip(oneLine(e.Args), 80), status)
		case workflow.GoalComplete:
			line = fmt.Sprintf("  goal %s complete: %s", e.Goal, sanitize.Clip(oneLine(e.Output), 80))
		case workflow.StepComplete:
			line = "step " + e.Step + " complete"
		case workflow.WorkflowComplete:
			line = fmt.Sprintf("workflow complete (%d tokens in, %d out)", e.Usage.InputTokens, e.Usage.OutputTokens)
		case workflow.ErrorEvent:
			line = "error: " + e.Message
		default:
			return
		}
		fmt.Fprintln(w, line)
	}
}

// oneLine folds runs of white space, line breaks included, into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Main dispatches the workflow commands; it returns false for other commands.
// env is the agent's environment, read once at its entry.
func Main(ctx context.Context, env agentconfig.Env, args []string, stdout, stderr io.Writer) (int, bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "run":
		return Run(ctx, env, args[1:], stdout, stderr), true
	case "validate":
		return Validate(args[1:], stdout, stderr), true
	case "inspect":
		return Inspect(args[1:], stdout, stderr), true
	case "rpc":
		return RPC(ctx, env, args[1:], os.Stdin, stdout, stderr), true
	}
	return 0, false
}
