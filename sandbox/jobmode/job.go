// Package jobmode is the sandbox's job mode: it runs one orchestrator job
// (spec.job) in a fresh sandbox, in its job directory (jobspace), with the
// profile's model and tools within the job's limits, and reports the outcome
// with the job's outputs and log uploaded.
package jobmode

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/agentfile"
	"github.com/remote-agents/remote-agents/sandbox/confine"
	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/jobspace"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/sandbox/upload"
	"github.com/remote-agents/remote-agents/sandbox/workflow"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/sanitize"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Config is job mode's: where job directories go and the run's limits.
type Config struct {
	// Root holds the job directory, Root/{job_id} (RA_JOB_ROOT; the
	// workspace when unset).
	Root string
	// NetworkIsolated: the launcher vouches that nothing reaches a network
	// from the sandbox but the platform (RA_JOB_NETWORK_ISOLATED), so bash
	// may run in a job without network where no network namespace can be
	// made.
	NetworkIsolated bool
	// Dedicated: the launcher vouches that the sandbox is a machine of its
	// own (RA_SANDBOX_DEDICATED: a Fargate task), with no other job's files
	// on it, so that without Landlock bash is confined to its job by
	// ownership alone: it runs as the tools' user, who may write only work/
	// and output/, read input/, and neither read logs/ and memory/ nor the
	// root agent's environment.
	Dedicated bool
	// DefaultTimeout bounds a job whose spec sets none (DefaultTimeout);
	// CallTimeout one model call (DefaultCallTimeout).
	DefaultTimeout time.Duration
	CallTimeout    time.Duration
}

// Sandbox is what job mode takes of the sandbox it runs in.
type Sandbox struct {
	// Client is the session's gateway client (with its sandbox token); Log
	// the agent's log.
	Client *gateway.Client
	Log    *slog.Logger
	// SessionID and Token are the session's and its sandbox token, the key
	// of the model route; ModelGateway the base URL of the model routes.
	SessionID, Token, ModelGateway string
	// LLM is the sandbox's own model: a profile's "local" model is its local
	// server, "scripted" its script.
	LLM agentconfig.LLM
	// Workspace, Tools, ToolUser and Secrets are as remote.Config's.
	Workspace string
	Tools     *toolenv.Env
	ToolUser  *toolenv.User
	Secrets   *redact.Secrets
	// Heartbeat is how often the running job heart-beats.
	Heartbeat time.Duration
}

// Runner runs the job of a sandbox's spec.
type Runner struct {
	sb Sandbox
	c  Config
}

// New is the job runner of the sandbox sb, with job mode's settings c.
func New(sb Sandbox, c Config) *Runner { return &Runner{sb: sb, c: c} }

// Job mode's limits.
const (
	// DefaultTimeout bounds a job whose constraints set no timeout.
	DefaultTimeout = 15 * time.Minute
	// DefaultCallTimeout bounds one model call of a job.
	DefaultCallTimeout = 5 * time.Minute
	// maxJobCalls bounds a job's model calls.
	maxJobCalls = 100
	// MaxViolations is how many refused escapes (a tool call the policy
	// denies) a job's agent may try: the next one fails the job with
	// policy_violation.
	MaxViolations = 3
	// maxEventChars bounds the text of an event and of a log record.
	maxEventChars = sandboxwire.MaxEventTextChars
	// maxJobLogBytes bounds logs/job.log; what comes after is dropped.
	maxJobLogBytes = 64 << 20
)

// Why a job's run stops early (context causes).
var (
	errJobTimeout   = errors.New("the job ran past its timeout")
	errJobCancelled = errors.New("the job was cancelled")
	// errPolicyViolation: the agent kept trying what its policy refuses.
	errPolicyViolation = errors.New("policy violation")
	// errIsolation: bash is among the job's tools and the isolation it
	// needs cannot be had here: the job fails before any tool runs, never
	// with bash unconfined or quietly left out.
	errIsolation = errors.New("isolation unavailable")
)

// Run runs the orchestrator job spec.Job (job mode): it lays out the job
// directory, reports ready then working (the platform's STARTED), runs the
// profile's agent on the input within the job's limits, seals output/,
// uploads its files and the log, and reports ended or failed with the job
// report. system is the primed system prompt (the guardrails first).
func (r *Runner) Run(ctx context.Context, spec sandboxwire.Spec, system string) error {
	js := spec.Job
	jc := r.c
	jc.Root = cmp.Or(jc.Root, r.sb.Workspace)
	report := func(rep sandboxwire.JobReport, state sandboxwire.State, reason sandboxwire.Reason) error {
		var orders sandboxwire.Orders
		return r.sb.Client.Do(context.WithoutCancel(ctx), http.MethodPost, sandboxwire.RouteStatus,
			sandboxwire.StatusReport{State: state, Reason: reason, Job: &rep}, &orders)
	}
	dir, err := jobspace.Layout(jc.Root, js.JobID, js.InputData)
	if err != nil {
		r.sb.Log.Error("job directory", slog.String("error", err.Error()))
		_ = report(failedReport(sandboxwire.FailureCrash, "The job directory could not be laid out: "+err.Error(), 0), sandboxwire.Failed, sandboxwire.ReasonError)
		return err
	}
	for _, sub := range []string{jobspace.Work, jobspace.Output} {
		if err := r.sb.ToolUser.OwnTree(dir.Sub(sub)); err != nil {
			return err
		}
	}
	jl, err := openJobLog(dir.Sub(jobspace.Logs), r.sb.Secrets.String)
	if err != nil {
		return err
	}
	j := &jobRun{r: r, spec: js, dir: dir, log: jl}
	loop, budget, err := j.agent(system, spec.Tools, jc)
	if err != nil {
		r.sb.Log.Error("job's model or tools", slog.String("error", err.Error()))
		jl.write("job_failed", map[string]any{"error": err.Error()})
		_ = jl.close()
		rep, reason := failedReport(sandboxwire.FailureCrash, "The agent could not start: "+err.Error(), 0), sandboxwire.ReasonModelUnavailable
		if errors.Is(err, errIsolation) {
			rep, reason = failedReport(sandboxwire.FailurePolicyViolation, sandboxwire.IsolationUnavailable+strings.TrimPrefix(err.Error(), errIsolation.Error()+": "), 0), sandboxwire.ReasonError
		}
		j.upload(ctx, &rep, nil)
		_ = report(rep, sandboxwire.Failed, reason)
		return err
	}
	if err := r.sb.Client.Ready(ctx, spec.Guardrails.Hash, nil); err != nil {
		return err
	}
	if err := r.sb.Client.Status(ctx, sandboxwire.Working, "", ""); err != nil {
		return err
	}
	timeout := cmp.Or(time.Duration(js.TimeoutSeconds)*time.Second, jc.DefaultTimeout, DefaultTimeout)
	jl.write("job_started", map[string]any{"job_id": js.JobID, "agent_id": js.Profile.AgentID, "provider": js.Profile.Provider, "model": js.Profile.Model,
		"token_limit": js.TokenLimit, "timeout_seconds": int(timeout / time.Second), "network": js.Network, "tools": j.tools, "input_files": dir.InputFiles})
	r.sb.Log.Info("job started", slog.String("job_id", js.JobID), slog.Any("tools", j.tools))

	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	tctx, cancelTimeout := context.WithTimeoutCause(runCtx, timeout, errJobTimeout)
	defer cancelTimeout()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watch(tctx, cancelRun, func() (int, int64) { return dir.OutputCount(), jl.size() })
	}()
	answer, calls, runErr := j.run(tctx, loop)
	cause := context.Cause(tctx)
	cancelTimeout()
	<-watched

	rep := j.outcome(calls, runErr, cause, ctx.Err() != nil)
	rep.TokensUsed = budget.Used()
	jl.write("job_"+string(rep.Outcome), map[string]any{"tokens_used": rep.TokensUsed, "failure": rep.Failure, "answer": answer})
	r.sb.Log.Info("job over", slog.String("job_id", js.JobID), slog.String("outcome", string(rep.Outcome)), slog.Int64("tokens_used", rep.TokensUsed))
	files, err := j.seal()
	if err != nil && rep.Outcome == sandboxwire.JobCompleted {
		rep = failedReport(sandboxwire.FailureCrash, "The outputs could not be collected: "+err.Error(), rep.TokensUsed)
	}
	if err != nil {
		jl.write("outputs_refused", map[string]any{"error": err.Error()})
	}
	_ = jl.close()
	j.upload(ctx, &rep, files)
	state, reason := sandboxwire.Ended, sandboxwire.ReasonShutdown
	if rep.Outcome == sandboxwire.JobFailed {
		state, reason = sandboxwire.Failed, sandboxwire.ReasonError
		switch rep.Failure.Category {
		case sandboxwire.FailureTimeout:
			reason = sandboxwire.ReasonTimeout
		case sandboxwire.FailureTokenLimit:
			reason = sandboxwire.ReasonTokenLimit
		}
	}
	return report(rep, state, reason)
}

func failedReport(cat sandboxwire.FailureCategory, msg string, used int64) sandboxwire.JobReport {
	return sandboxwire.JobReport{Outcome: sandboxwire.JobFailed, Failure: &sandboxwire.JobFailure{Category: cat, Message: msg}, TokensUsed: used}
}

// watch heartbeats until ctx ends, and cancels the run when the platform
// says stop (the job cancelled). Each heartbeat carries the sandbox's use
// and the job's progress (its output files, its log's size).
func (r *Runner) watch(ctx context.Context, cancel context.CancelCauseFunc, progress func() (files int, logBytes int64)) {
	beat := time.NewTicker(r.sb.Heartbeat)
	defer beat.Stop()
	meter := newUsageMeter()
	meter.sample(time.Now()) // the first CPU figure is over the first interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
		}
		var orders sandboxwire.Orders
		// Each heartbeat carries the sandbox's use (the job's resources).
		use := meter.sample(time.Now())
		if use != nil {
			use.Files, use.LogBytes = progress()
		}
		err := r.sb.Client.Do(ctx, http.MethodPost, sandboxwire.RouteHeartbeat, sandboxwire.HeartbeatReport{Usage: use}, &orders)
		if _, ok := errors.AsType[*gateway.AuthError](err); ok || (err == nil && orders.Stop) {
			r.sb.Log.Info("job stopping: the platform says stop")
			cancel(errJobCancelled)
			return
		}
	}
}

// jobRun is one job's run.
type jobRun struct {
	r     *Runner
	spec  *sandboxwire.JobSpec
	dir   jobspace.Dir
	log   *jobLog
	tools []string
	// workflow is the profile's Agentfile the job runs, if its skills name
	// one; system the system prompt it runs with.
	workflow *agentfile.Workflow
	system   string

	mu         sync.Mutex
	violations int
}

// agent builds the job's loop: the profile's model within the job's token
// budget and the call timeout, and exactly the profile's tools that exist,
// confined to the job directory (jobspace.Policy), without network unless
// the job allows it.
func (j *jobRun) agent(system string, specTools []string, jc Config) (*llm.Loop, *llm.Budget, error) {
	p := j.spec.Profile
	cfg, err := j.r.jobLLM(p)
	if err != nil {
		return nil, nil, err
	}
	provider, err := providers.New(cfg, j.r.sb.Workspace)
	if err != nil {
		return nil, nil, err
	}
	budget := &llm.Budget{Provider: provider, Limit: j.spec.TokenLimit, CallTimeout: cmp.Or(jc.CallTimeout, DefaultCallTimeout)}
	pol, err := jobspace.Policy(j.dir.Path)
	if err != nil {
		return nil, nil, err
	}
	enabled, noNetwork, err := j.enabledTools(specTools, jc)
	if err != nil {
		return nil, nil, j.isolationUnavailable(err)
	}
	j.tools = enabled
	confined, err := j.confinement(jc)
	if err != nil {
		return nil, nil, j.isolationUnavailable(err)
	}
	o := tools.Options{MemoryPath: filepath.Join(j.dir.Sub(jobspace.Memory), "memory.json"), User: j.r.sb.ToolUser, Enabled: enabled, NoNetwork: noNetwork,
		Confine: confined}
	if j.r.sb.Tools != nil {
		o.Env = func() []string { return inJobDir(j.r.sb.Tools.Environ(), j.dir.Path) }
	}
	reg, err := tools.New(pol, o)
	if err != nil {
		return nil, nil, err
	}
	if j.workflow, err = j.agentfile(); err != nil {
		return nil, nil, err
	}
	j.system = system + jobSystem
	loop := &llm.Loop{Provider: budget, Model: cfg.Model, System: system + jobSystem, MaxTokens: cfg.MaxTokens,
		Tools: tools.Sanitised{Tools: guarded{Tools: reg, j: j}, Secrets: j.r.sb.Secrets}, MaxTurns: maxJobCalls, OnEvent: j.event}
	return loop, budget, nil
}

// agentfile is the Agentfile the profile's skills name (the first, of those
// stored with the profile), parsed and validated; nil when they name none.
// Its prompts are inline: a profile's Agentfile reads no file (FROM).
func (j *jobRun) agentfile() (*agentfile.Workflow, error) {
	p := j.spec.Profile
	for _, name := range p.AllowedSkills {
		src, ok := p.Agentfiles[name]
		if !ok {
			continue
		}
		wf, err := agentfile.Parse(name, src)
		if err != nil {
			return nil, fmt.Errorf("agentfile %s: %w", name, err)
		}
		for _, a := range wf.Agents {
			if a.From != "" {
				return nil, fmt.Errorf("agentfile %s: agent %s reads a prompt file (FROM), which a profile's Agentfile cannot", name, a.Name)
			}
		}
		for _, g := range wf.Goals {
			if g.From != "" {
				return nil, fmt.Errorf("agentfile %s: goal %s reads a prompt file (FROM), which a profile's Agentfile cannot", name, g.Name)
			}
		}
		if err := agentfile.Validate(wf); err != nil {
			return nil, fmt.Errorf("agentfile %s: %w", name, err)
		}
		return wf, nil
	}
	return nil, nil
}

// run runs the job's agent: the profile's Agentfile when it names one (its
// inputs from inputData's string members of their names, the job's prompt
// after the guardrails), else the tool loop on the job's prompt. It returns
// the answer and the model calls made.
func (j *jobRun) run(ctx context.Context, loop *llm.Loop) (string, int, error) {
	if j.workflow == nil {
		conv := llm.Conversation{Messages: []llm.Message{{Role: llm.User, Content: j.prompt()}}}
		out, err := loop.Run(ctx, &conv)
		return out.Reply.Content, out.Calls, err
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(j.spec.InputData, &top) // an object: Layout checked it
	given := map[string]string{}
	for _, in := range j.workflow.Inputs {
		var v string
		if raw, ok := top[in.Name]; ok && json.Unmarshal(raw, &v) == nil {
			given[in.Name] = v
		}
	}
	inputs, err := workflow.BindInputs(j.workflow, given)
	if err != nil {
		return "", 0, fmt.Errorf("agentfile %s: %w", j.workflow.Name, err)
	}
	calls := 0
	var mu sync.Mutex
	res, err := workflow.Run(ctx, j.workflow, inputs, workflow.Options{System: j.system + "\n\n" + j.prompt(), Provider: loop.Provider,
		Model: loop.Model, MaxTokens: loop.MaxTokens, Tools: loop.Tools, MaxToolTurns: maxJobCalls,
		OnEvent: func(e workflow.Event) {
			switch e.Type {
			case workflow.ModelReply:
				mu.Lock()
				calls++
				mu.Unlock()
				j.log.write("model_replied", map[string]any{"goal": e.Goal, "agent": e.Agent, "input_tokens": e.Usage.InputTokens, "output_tokens": e.Usage.OutputTokens})
			case workflow.ToolCallEvent:
				j.log.write("tool_call", map[string]any{"goal": e.Goal, "tool": e.Tool, "args": sanitize.Clip(j.r.sb.Secrets.String(e.Args), maxEventChars),
					"is_error": e.IsError, "output": sanitize.Clip(e.Output, maxEventChars)})
			case workflow.GoalComplete, workflow.StepComplete:
				j.log.write(e.Type, map[string]any{"step": e.Step, "goal": e.Goal})
			}
		}})
	mu.Lock()
	defer mu.Unlock()
	return res.Output, calls, err
}

// enabledTools are the profile's allowed skills that are workspace tools
// (and that the spec's tools list, if it has one), without the web tools
// when the job has no network. noNetwork says bash runs in a namespace of
// its own. A job without network whose tools include bash, where no network
// namespace can be made and the launcher does not vouch for the sandbox's
// isolation, is errIsolation.
func (j *jobRun) enabledTools(specTools []string, jc Config) (enabled []string, noNetwork bool, err error) {
	enabled = []string{}
	for _, name := range toolspec.WorkspaceTools() {
		if !slices.Contains(j.spec.Profile.AllowedSkills, name) || (specTools != nil && !slices.Contains(specTools, name)) {
			continue
		}
		if !j.spec.Network && (name == "web_fetch" || name == "web_search") {
			continue
		}
		enabled = append(enabled, name)
	}
	if j.spec.Network || !slices.Contains(enabled, "bash") {
		return enabled, false, nil
	}
	if err := networkIsolation(); err == nil {
		return enabled, true, nil
	} else if !jc.NetworkIsolated {
		return nil, false, fmt.Errorf("%w: the job has no network and bash is among its tools, but no network namespace can be made here (%w) and the launcher does not isolate the sandbox (RA_JOB_NETWORK_ISOLATED)", errIsolation, err)
	}
	return enabled, false, nil
}

// confinement is what bash's commands may reach of the file system: the
// job's input/ to read, its work/ and output/ to write, and the system's
// programs; nothing else (another job's directory, the agent's files, /tmp).
// nil without bash. Without Landlock (an older kernel) bash is confined by
// ownership where that is enough (see Config.Dedicated: nil rules, and the
// job's log says so); anywhere else it cannot be: errIsolation.
func (j *jobRun) confinement(jc Config) (*confine.Rules, error) {
	if !slices.Contains(j.tools, "bash") {
		return nil, nil
	}
	_, err := landlockABI()
	if err == nil {
		return &confine.Rules{Read: []string{j.dir.Sub(jobspace.Input)}, Write: []string{j.dir.Sub(jobspace.Work), j.dir.Sub(jobspace.Output)}}, nil
	}
	tools := j.r.sb.ToolUser
	if jc.Dedicated && euid() == 0 && tools != nil && tools.UID != 0 {
		j.log.write("bash_confined_by_ownership", map[string]any{"reason": "no Landlock here (" + err.Error() + "): bash runs as " + tools.Name +
			", who may write only work/ and output/ of this job, the only job on this machine"})
		return nil, nil
	}
	return nil, fmt.Errorf("%w: bash is among the job's tools, but its commands cannot be confined to the job directory: no Landlock here (%w), "+
		"and the sandbox is not a machine of its own (RA_SANDBOX_DEDICATED) whose root agent runs them as another user", errIsolation, err)
}

// isolationUnavailable logs why the job's isolation cannot be had, in the
// sandbox's log and the job's, and returns err.
func (j *jobRun) isolationUnavailable(err error) error {
	j.r.sb.Log.Error("the job does not run: its isolation cannot be had here", slog.String("error", err.Error()))
	j.log.write("isolation_unavailable", map[string]any{"reason": err.Error()})
	return err
}

// networkIsolation says whether commands can run without network here, and
// landlockABI whether they can be confined (tests replace them).
var (
	networkIsolation = tools.NetworkIsolation
	landlockABI      = confine.ABI
	euid             = os.Geteuid
)

// inJobDir is a tools' environment with WORKSPACE the job directory, and
// TMPDIR in its work/ (a confined command has no /tmp).
func inJobDir(environ []string, dir string) []string {
	out := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		return strings.HasPrefix(kv, "WORKSPACE=") || strings.HasPrefix(kv, "TMPDIR=")
	})
	return append(out, "WORKSPACE="+dir, "TMPDIR="+filepath.Join(dir, jobspace.Work))
}

// jobLLM is the model of a job's profile: its provider, model, max tokens
// and temperature; a hosted provider through the platform's model route
// with the sandbox token, the scripted one with RA_LLM_SCRIPT, "local" the
// local server the sandbox is configured with (ollama by default).
func (r *Runner) jobLLM(p sandboxwire.JobProfile) (agentconfig.LLM, error) {
	l := agentconfig.LLM{Provider: p.Provider, Model: p.Model, MaxTokens: cmp.Or(p.MaxTokens, agentconfig.Defaults().LLM.MaxTokens),
		TimeoutSeconds: int(cmp.Or(r.c.CallTimeout, DefaultCallTimeout) / time.Second)}
	switch p.Provider {
	case "scripted":
		l.Script = r.sb.LLM.Script
	case "local":
		l.Provider = "ollama"
		if r.sb.LLM.Provider == "ollama" || r.sb.LLM.Provider == "openai-compatible" {
			l.Provider = r.sb.LLM.Provider
		}
		l.BaseURL, l.APIKey, l.APIKeyEnv = r.sb.LLM.BaseURL, r.sb.LLM.APIKey, r.sb.LLM.APIKeyEnv
	case "ollama", "openai-compatible":
		l.BaseURL, l.APIKey, l.APIKeyEnv = r.sb.LLM.BaseURL, r.sb.LLM.APIKey, r.sb.LLM.APIKeyEnv
	default:
		if !sandboxwire.ViaGateway(p.Provider) {
			return l, fmt.Errorf("llm_provider %q is not available in a sandbox", p.Provider)
		}
		l.BaseURL = sandboxwire.ModelBaseURL(r.sb.ModelGateway, r.sb.SessionID, p.Provider)
		l.APIKey = r.sb.Token
	}
	// Anthropic's API takes no temperature (providers.New refuses one).
	if l.Provider != "anthropic" {
		t := p.Temperature
		l.Temperature = &t
	}
	return l, nil
}

// jobSystem tells the model how job mode works, after the primed prompt.
const jobSystem = "\n\n# Job mode\n\nYou run one job of an orchestrator, alone, without a user to ask. " +
	"Your tools work in the job directory; paths are relative to it. input/ holds the job's input and is read-only; " +
	"work/ is yours to work in; put every result in output/ (only the files of output/ are delivered); memory/ keeps your notes. " +
	"Nothing outside the job directory can be read or written. When the job is done, answer with a short summary and call no tool."

// prompt is the job's first user message: where its input is, where
// results go.
func (j *jobRun) prompt() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run job %s. Its input is input/%s", j.spec.JobID, jobspace.InputFile)
	if len(j.dir.InputFiles) > 0 {
		b.WriteString("; its input files are ")
		for i, f := range j.dir.InputFiles {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("input/" + f)
		}
	}
	fmt.Fprintf(&b, ". Write your results to output/. Your tools: %s.", strings.Join(j.tools, ", "))
	return b.String()
}

// event logs each model reply and tool call to the job's log and appends
// them to the session's events (best effort: the run goes on without).
func (j *jobRun) event(ctx context.Context, e llm.LoopEvent) error {
	var p sandboxwire.Payload
	switch e.Type {
	case llm.ModelReplied:
		j.log.write("model_replied", map[string]any{"text": e.Message.Content, "tool_calls": len(e.Message.ToolCalls),
			"input_tokens": e.Response.Usage.InputTokens, "output_tokens": e.Response.Usage.OutputTokens, "latency_ms": e.Latency.Milliseconds()})
		p = sandboxwire.AgentMessage{Text: e.Message.Content, ToolCalls: len(e.Message.ToolCalls),
			Usage: sandboxwire.Usage{InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens}}
	case llm.ToolFinished:
		args := string(j.r.sb.Secrets.JSON(e.Call.Args))
		j.log.write("tool_call", map[string]any{"tool": e.Call.Name, "args": sanitize.Clip(args, maxEventChars), "is_error": e.Message.IsError,
			"output": sanitize.Clip(e.Message.Content, maxEventChars), "latency_ms": e.Latency.Milliseconds()})
		p = sandboxwire.ToolCall{ToolCallID: e.Call.ID, Tool: e.Call.Name, Args: sanitize.Clip(args, maxEventChars), IsError: e.Message.IsError,
			Output: sanitize.Clip(e.Message.Content, maxEventChars)}
	default:
		return nil
	}
	if err := j.r.sb.Client.Emit(ctx, p); err != nil && ctx.Err() == nil {
		j.r.sb.Log.Warn("job event not appended", slog.String("error", err.Error()))
	}
	return nil
}

// guarded records the tool calls the policy refuses: each is refused to the
// model and written to the job's log; after MaxViolations the next one ends
// the run (errPolicyViolation).
type guarded struct {
	llm.Tools
	j *jobRun
}

// Run runs a call and records a refusal.
func (g guarded) Run(ctx context.Context, call llm.ToolCall) (llm.ToolResult, error) {
	res, err := g.Tools.Run(ctx, call)
	if err != nil || !res.IsError || !strings.Contains(res.Content, policy.ErrDenied.Error()) {
		return res, err
	}
	g.j.mu.Lock()
	g.j.violations++
	n := g.j.violations
	g.j.mu.Unlock()
	g.j.log.write("policy_violation", map[string]any{"tool": call.Name, "args": sanitize.Clip(string(g.j.r.sb.Secrets.JSON(call.Args)), maxEventChars),
		"refusal": res.Content, "count": n})
	if n > MaxViolations {
		return res, fmt.Errorf("%w: %d refused tool calls, the last %s", errPolicyViolation, n, call.Name)
	}
	return res, nil
}

// outcome is how the run went: completed when the model answered, else
// the failure's category (cancelled when the platform said stop).
func (j *jobRun) outcome(calls int, err, cause error, stopped bool) sandboxwire.JobReport {
	j.mu.Lock()
	violations := j.violations
	j.mu.Unlock()
	var model *llm.ModelError
	switch {
	case err == nil:
		return sandboxwire.JobReport{Outcome: sandboxwire.JobCompleted}
	case errors.Is(cause, errJobTimeout):
		return failedReport(sandboxwire.FailureTimeout, fmt.Sprintf("The job ran past its timeout after %d model calls.", calls), 0)
	case errors.Is(cause, errJobCancelled) || stopped:
		return sandboxwire.JobReport{Outcome: sandboxwire.JobCancelled}
	case errors.Is(err, llm.ErrTokenLimit):
		return failedReport(sandboxwire.FailureTokenLimit, sanitize.Clip("The token limit stopped the job: "+err.Error(), 500), 0)
	case errors.Is(err, errPolicyViolation):
		return failedReport(sandboxwire.FailurePolicyViolation, fmt.Sprintf("The agent kept trying what its policy refuses (%d refused tool calls).", violations), 0)
	case errors.Is(err, llm.ErrCallTimeout):
		return failedReport(sandboxwire.FailureTimeout, "A model call took longer than its timeout.", 0)
	case errors.As(err, &model) && providers.RateLimited(err):
		return failedReport(sandboxwire.FailureRateLimit, "The model provider kept limiting the rate of calls.", 0)
	case errors.As(err, &model):
		return failedReport(sandboxwire.FailureCrash, "The model could not be reached.", 0)
	case errors.Is(err, llm.ErrMaxTurns):
		return failedReport(sandboxwire.FailureCrash, fmt.Sprintf("The agent did not finish within %d model calls.", maxJobCalls), 0)
	default:
		return failedReport(sandboxwire.FailureCrash, sanitize.Error(err.Error()), 0)
	}
}

// seal makes output/ read-only and lists its files.
func (j *jobRun) seal() ([]jobspace.File, error) {
	if err := j.dir.Seal(); err != nil {
		return nil, err
	}
	return j.dir.Outputs()
}

// upload uploads the output files and the log through the channel's
// uploads route and records them in rep; what cannot be uploaded fails a
// job that had completed (crash), and is left out of the report.
func (j *jobRun) upload(ctx context.Context, rep *sandboxwire.JobReport, files []jobspace.File) {
	ctx = context.WithoutCancel(ctx)
	r, err := os.OpenRoot(j.dir.Path)
	if err == nil {
		var lf jobspace.File
		if lf, err = j.dir.Hash(r, sandboxwire.JobLogPath); err == nil {
			files = append(slices.Clone(files), lf)
		}
		_ = r.Close()
	}
	if err != nil {
		j.r.sb.Log.Warn("job log", slog.String("error", err.Error()))
	}
	if len(files) == 0 {
		return
	}
	in := sandboxwire.UploadsRequest{Tool: sandboxwire.JobUploads, ToolCallID: j.spec.JobID}
	byPath := map[string]jobspace.File{}
	for _, f := range files {
		in.Files = append(in.Files, sandboxwire.UploadFile{Path: f.Path, SizeBytes: f.Size, ContentType: upload.ContentType(f.Path)})
		byPath[f.Path] = f
	}
	out, err := j.r.sb.Client.Uploads(ctx, in)
	var uploaded []sandboxwire.JobFile
	for _, up := range out.Uploads {
		if err != nil {
			break
		}
		f, ok := byPath[up.Path]
		if !ok {
			err = fmt.Errorf("the platform offered an upload for an unknown file %q", up.Path)
			break
		}
		if err = j.put(ctx, f, up); err == nil {
			uploaded = append(uploaded, sandboxwire.JobFile{Path: f.Path, Key: up.Key, SizeBytes: f.Size, SHA256: f.SHA256})
		}
	}
	if err == nil && len(uploaded) != len(files) {
		err = fmt.Errorf("the platform offered %d uploads for %d files", len(uploaded), len(files))
	}
	for _, f := range uploaded {
		if f.Path == sandboxwire.JobLogPath {
			rep.Log = &f
		} else {
			rep.Outputs = append(rep.Outputs, f)
		}
	}
	if err != nil {
		j.r.sb.Log.Error("job upload", slog.String("error", err.Error()))
		if rep.Outcome == sandboxwire.JobCompleted {
			*rep = failedReport(sandboxwire.FailureCrash, "The outputs could not be uploaded.", rep.TokensUsed)
		}
	}
}

// put uploads one file of the job directory (opened inside it) to its
// presigned URL with the headers signed into it.
func (j *jobRun) put(ctx context.Context, f jobspace.File, up sandboxwire.Upload) error {
	fh, err := j.dir.Open(f.Path)
	if err != nil {
		return err
	}
	defer func() { _ = fh.Close() }()
	if err := upload.Put(ctx, &http.Client{Timeout: 10 * time.Minute}, up.URL, fh, f.Size, up.Headers); err != nil {
		return fmt.Errorf("upload %s: %w", f.Path, err)
	}
	return nil
}

// jobLog is logs/job.log: one JSON object a line, redacted, bounded.
type jobLog struct {
	mu      sync.Mutex
	f       *os.File
	n       int
	redact  func(string) string
	dropped bool
}

func openJobLog(dir string, redact func(string) string) (*jobLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, filepath.Base(sandboxwire.JobLogPath)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("job log: %w", err)
	}
	return &jobLog{f: f, redact: redact}, nil
}

// write appends one record.
func (l *jobLog) write(event string, fields map[string]any) {
	rec := map[string]any{"at": time.Now().UTC().Format(time.RFC3339Nano), "event": event}
	for k, v := range fields {
		rec[k] = v
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return
	}
	line := l.redact(string(raw)) + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil || l.dropped {
		return
	}
	if l.n+len(line) > maxJobLogBytes {
		l.dropped = true
		line = `{"event":"log_truncated"}` + "\n"
	}
	n, _ := io.Copy(l.f, bytes.NewReader([]byte(line)))
	l.n += int(n)
}

// size is how many bytes the log holds.
func (l *jobLog) size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.n)
}

func (l *jobLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
