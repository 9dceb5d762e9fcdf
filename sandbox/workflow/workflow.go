// Package workflow executes Agentfile workflows: it binds inputs, runs RUN and
// LOOP steps in file order, runs each goal as a conversation with the model and
// its tools (one per agent, then a synthesis, for multi-agent goals), passes goal
// outputs on as $goal_name, and detects when a LOOP has converged.
package workflow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentfile"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/shared/sanitize"
)

// ConvergedMarker is how a model signals, on a line of its own, that a goal is met.
const ConvergedMarker = "CONVERGED"

// DefaultMaxToolTurns bounds the model calls of one goal conversation.
const DefaultMaxToolTurns = llm.DefaultMaxTurns

// ToolResult is what a tool gives back; a failed tool is content for the model.
type ToolResult = llm.ToolResult

// Tools runs the tools a model may call (see llm.Tools).
type Tools = llm.Tools

// Event types, as the stdio transport and stderr report them.
const (
	WorkflowStarted  = "workflow_started"
	StepStarted      = "step_started"
	GoalStarted      = "goal_started"
	GoalComplete     = "goal_complete"
	ToolCallEvent    = "tool_call"
	ModelReply       = "model_reply"
	LoopIteration    = "loop_iteration"
	StepComplete     = "step_complete"
	WorkflowComplete = "workflow_complete"
	ErrorEvent       = "error"
)

// Event is something that happened during a run.
type Event struct {
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	Step      string    `json:"step,omitempty"`
	Goal      string    `json:"goal,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	Iteration int       `json:"iteration,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Args      string    `json:"args,omitempty"`
	IsError   bool      `json:"is_error,omitempty"`
	Output    string    `json:"output,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	Usage     llm.Usage `json:"usage,omitzero"`
	Model     string    `json:"model,omitempty"`
	Latency   float64   `json:"latency_ms,omitempty"`
}

// Options configure a run.
type Options struct {
	// System, if set, starts every system prompt (a sandbox's guardrails).
	System    string
	Provider  llm.Provider
	Model     string
	MaxTokens int
	Tools     Tools // nil: no tools
	// MaxToolTurns bounds each goal conversation (default DefaultMaxToolTurns).
	MaxToolTurns int
	// OnEvent receives events; it must be safe for concurrent calls.
	OnEvent func(Event)
	// Done lists goals already completed (resume): their outputs are reused and
	// they do not run again in RUN steps.
	Done map[string]string
	// OnGoal is called after each completed goal with the outputs so far (to
	// persist state); an error stops the run.
	OnGoal func(goal string, outputs map[string]string) error
	// OnMessage receives every message of every goal conversation (user prompts,
	// model replies, tool results), for persistence and telemetry. It must be safe
	// for concurrent calls (multi-agent goals run in parallel).
	OnMessage func(goal, agent string, m llm.Message)
}

// Result is a finished run.
type Result struct {
	Workflow   string            `json:"workflow"`
	Output     string            `json:"output"`
	Outputs    map[string]string `json:"outputs"`
	Iterations map[string]int    `json:"iterations,omitempty"`
	Converged  map[string]string `json:"converged,omitempty"`
	Usage      llm.Usage         `json:"usage"`
}

// BindInputs checks given inputs against the workflow's: unknown names are
// refused, DEFAULT fills what is missing, a required input left out is an error.
func BindInputs(wf *agentfile.Workflow, given map[string]string) (map[string]string, error) {
	known := map[string]*agentfile.Input{}
	for _, in := range wf.Inputs {
		known[in.Name] = in
	}
	var unknown []string
	for k := range given {
		if known[k] == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown input %s (the workflow takes: %s)", strings.Join(unknown, ", "), inputNames(wf))
	}
	bound := map[string]string{}
	var missing []string
	for _, in := range wf.Inputs {
		switch v, ok := given[in.Name]; {
		case ok:
			bound[in.Name] = v
		case in.Default != nil:
			bound[in.Name] = in.Default.Text
		default:
			missing = append(missing, in.Name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing required input %s: pass --input %s=…", strings.Join(missing, ", "), missing[0])
	}
	return bound, nil
}

func inputNames(wf *agentfile.Workflow) string {
	if len(wf.Inputs) == 0 {
		return "none"
	}
	names := make([]string, len(wf.Inputs))
	for i, in := range wf.Inputs {
		names[i] = in.Name
	}
	return strings.Join(names, ", ")
}

// Run executes wf with inputs already bound (see BindInputs).
func Run(ctx context.Context, wf *agentfile.Workflow, inputs map[string]string, o Options) (Result, error) {
	if o.Provider == nil {
		return Result{}, errors.New("workflow: no model provider")
	}
	if o.MaxToolTurns <= 0 {
		o.MaxToolTurns = DefaultMaxToolTurns
	}
	r := &run{wf: wf, o: o, inputs: inputs, outputs: map[string]string{}, res: Result{
		Workflow: wf.Name, Outputs: map[string]string{}, Iterations: map[string]int{}, Converged: map[string]string{},
	}}
	for k, v := range o.Done {
		r.outputs[k] = v
	}
	r.emit(Event{Type: WorkflowStarted})
	for _, step := range wf.Steps {
		r.emit(Event{Type: StepStarted, Step: step.Name})
		var err error
		if step.Kind == agentfile.LoopStep {
			err = r.loop(ctx, step)
		} else {
			err = r.runOnce(ctx, step)
		}
		if err != nil {
			r.emit(Event{Type: ErrorEvent, Step: step.Name, Message: err.Error()})
			return r.result(), err
		}
		r.emit(Event{Type: StepComplete, Step: step.Name})
	}
	res := r.result()
	r.emit(Event{Type: WorkflowComplete, Output: res.Output, Usage: res.Usage})
	return res, nil
}

type run struct {
	wf      *agentfile.Workflow
	o       Options
	inputs  map[string]string
	mu      sync.Mutex
	outputs map[string]string
	last    string
	res     Result
}

func (r *run) emit(e Event) {
	if r.o.OnEvent != nil {
		e.Time = time.Now().UTC()
		r.o.OnEvent(e)
	}
}

func (r *run) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.res
	out.Outputs = map[string]string{}
	for k, v := range r.outputs {
		out.Outputs[k] = v
	}
	out.Output = r.last
	return out
}

func (r *run) goal(name string) *agentfile.Goal {
	for _, g := range r.wf.Goals {
		if g.Name == name {
			return g
		}
	}
	return nil
}

func (r *run) runOnce(ctx context.Context, step *agentfile.Step) error {
	for _, name := range step.Using {
		if out, done := r.o.Done[name]; done {
			r.last = out
			continue
		}
		if _, _, err := r.runGoal(ctx, step, r.goal(name), 0, ""); err != nil {
			return err
		}
	}
	return nil
}

// loop repeats the step's goals until convergence or the WITHIN limit.
func (r *run) loop(ctx context.Context, step *agentfile.Step) error {
	limit := step.Within
	if step.WithinVar != "" {
		n, err := strconv.Atoi(strings.TrimSpace(r.inputs[step.WithinVar]))
		if err != nil || n < 1 {
			return fmt.Errorf("LOOP %s: WITHIN $%s is %q, not a positive whole number", step.Name, step.WithinVar, r.inputs[step.WithinVar])
		}
		limit = n
	}
	var previous map[string]string
	for i := 1; ; i++ {
		r.emit(Event{Type: LoopIteration, Step: step.Name, Iteration: i})
		current := map[string]string{}
		explicit, toolsUsed := false, false
		for _, name := range step.Using {
			out, used, err := r.runGoal(ctx, step, r.goal(name), i, previous[name])
			if err != nil {
				return err
			}
			current[name] = out
			toolsUsed = toolsUsed || used
			explicit = explicit || signalsConvergence(out)
		}
		r.mu.Lock()
		r.res.Iterations[step.Name] = i
		r.mu.Unlock()
		reason := ""
		switch {
		case explicit:
			reason = "signalled"
		case !toolsUsed:
			reason = "no_tool_calls"
		case previous != nil && sameOutputs(previous, current):
			reason = "state_unchanged"
		case i >= limit:
			reason = "within_limit"
		}
		if reason != "" {
			r.mu.Lock()
			r.res.Converged[step.Name] = reason
			r.mu.Unlock()
			return nil
		}
		previous = current
	}
}

func signalsConvergence(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(strings.Trim(strings.TrimSpace(line), "*_`.")) == ConvergedMarker {
			return true
		}
	}
	return false
}

func sameOutputs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.TrimSpace(b[k]) != strings.TrimSpace(v) {
			return false
		}
	}
	return true
}

// runGoal runs one goal and records its output. It reports whether tools were used.
func (r *run) runGoal(ctx context.Context, step *agentfile.Step, g *agentfile.Goal, iteration int, previous string) (string, bool, error) {
	r.emit(Event{Type: GoalStarted, Step: step.Name, Goal: g.Name, Iteration: iteration})
	user := r.userPrompt(g, step, iteration, previous)
	var out string
	var used bool
	var err error
	if len(g.Using) == 0 {
		out, used, err = r.converse(ctx, g, "", r.systemPrompt(""), user, iteration)
	} else {
		out, used, err = r.multiAgent(ctx, g, user, iteration)
	}
	if err != nil {
		return "", false, fmt.Errorf("goal %s: %w", g.Name, err)
	}
	r.mu.Lock()
	r.outputs[g.Name] = out
	r.last = out
	snapshot := make(map[string]string, len(r.outputs))
	for k, v := range r.outputs {
		snapshot[k] = v
	}
	r.mu.Unlock()
	r.emit(Event{Type: GoalComplete, Step: step.Name, Goal: g.Name, Iteration: iteration, Output: out})
	if r.o.OnGoal != nil {
		if err := r.o.OnGoal(g.Name, snapshot); err != nil {
			return "", false, fmt.Errorf("goal %s: save state: %w", g.Name, err)
		}
	}
	return out, used, nil
}

// multiAgent asks each agent in parallel, with its persona, then has the model
// reconcile their answers.
func (r *run) multiAgent(ctx context.Context, g *agentfile.Goal, user string, iteration int) (string, bool, error) {
	type answer struct {
		agent, text string
		used        bool
		err         error
	}
	answers := make([]answer, len(g.Using))
	var wg sync.WaitGroup
	for i, name := range g.Using {
		persona := ""
		for _, a := range r.wf.Agents {
			if a.Name == name {
				persona = a.Prompt
			}
		}
		wg.Go(func() {
			text, used, err := r.converse(ctx, g, name, r.systemPrompt(persona), user, iteration)
			answers[i] = answer{agent: name, text: text, used: used, err: err}
		})
	}
	wg.Wait()
	var b strings.Builder
	used := false
	for _, a := range answers {
		if a.err != nil {
			return "", false, fmt.Errorf("agent %s: %w", a.agent, a.err)
		}
		used = used || a.used
		fmt.Fprintf(&b, "## Answer from agent %s\n\n%s\n\n", a.agent, a.text)
	}
	synthesis := "Several agents worked on this goal:\n\n" + user + "\n\n" + b.String() +
		"Reconcile their answers into one result for the goal: keep what they agree on, settle disagreements, and keep every point that stands."
	out, _, err := r.converse(ctx, g, "", r.systemPrompt(""), synthesis, iteration)
	return out, used, err
}

// converse runs the model with the tools until it answers without tool calls.
// It reports whether tools were used.
func (r *run) converse(ctx context.Context, g *agentfile.Goal, agent, system, user string, iteration int) (string, bool, error) {
	first := llm.Message{Role: llm.User, Content: user}
	r.message(g.Name, agent, first)
	loop := llm.Loop{Provider: r.o.Provider, Model: r.o.Model, System: system, MaxTokens: r.o.MaxTokens, Tools: r.o.Tools, MaxTurns: r.o.MaxToolTurns,
		OnEvent: func(_ context.Context, e llm.LoopEvent) error {
			switch e.Type {
			case llm.ModelReplied:
				r.mu.Lock()
				r.res.Usage = r.res.Usage.Add(e.Response.Usage)
				r.mu.Unlock()
				r.message(g.Name, agent, e.Message)
				r.emit(Event{Type: ModelReply, Goal: g.Name, Agent: agent, Iteration: iteration, Usage: e.Response.Usage,
					Latency: milliseconds(e.Latency), Model: e.Response.Model})
			case llm.ToolFinished:
				r.emit(Event{Type: ToolCallEvent, Goal: g.Name, Agent: agent, Iteration: iteration, Tool: e.Call.Name,
					Args: sanitize.Clip(string(e.Call.Args), maxArgs), Output: e.Message.Content, IsError: e.Message.IsError, Latency: milliseconds(e.Latency)})
				r.message(g.Name, agent, e.Message)
			}
			return nil
		}}
	out, err := loop.Run(ctx, &llm.Conversation{Messages: []llm.Message{first}})
	return out.Reply.Content, out.ToolCalls > 0, err
}

func milliseconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (r *run) message(goal, agent string, m llm.Message) {
	if r.o.OnMessage != nil {
		r.o.OnMessage(goal, agent, m)
	}
}

func (r *run) systemPrompt(persona string) string {
	var b strings.Builder
	if s := strings.TrimSpace(r.o.System); s != "" {
		b.WriteString(s + "\n\n")
	}
	if persona != "" {
		b.WriteString(strings.TrimSpace(persona) + "\n\n")
	}
	fmt.Fprintf(&b, "You are working on workflow %q, one goal at a time. Use the tools when they help; "+
		"a tool that fails tells you why, so adjust and try again or take another way. "+
		"When the goal is fully achieved, end your reply with a line reading %s.", r.wf.Name, ConvergedMarker)
	return b.String()
}

// Bounds, in runes: how much of an earlier goal's output goes into a prompt, and
// of a tool call's arguments into an event.
const (
	maxContext = 4000
	maxArgs    = 500
)

func (r *run) userPrompt(g *agentfile.Goal, step *agentfile.Step, iteration int, previous string) string {
	r.mu.Lock()
	vars := make(map[string]string, len(r.inputs)+len(r.outputs))
	for k, v := range r.inputs {
		vars[k] = v
	}
	// Sequential variables: $x is input x until goal x has produced output,
	// and goal x's output after; in goal x's own prompt it stays the input.
	outputs := make(map[string]string, len(r.outputs))
	for k, v := range r.outputs {
		outputs[k] = v
		vars[k] = v
	}
	if in, ok := r.inputs[g.Name]; ok {
		vars[g.Name] = in
	}
	r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "Goal %s:\n%s", g.Name, agentfile.Interpolate(g.Prompt, vars))
	referenced := agentfile.Refs(g.Prompt)
	var earlier []string
	for _, other := range r.wf.Goals {
		out, ok := outputs[other.Name]
		if ok && other.Name != g.Name && !contains(referenced, other.Name) {
			earlier = append(earlier, fmt.Sprintf("- %s: %s", other.Name, sanitize.Clip(out, maxContext)))
		}
	}
	if len(earlier) > 0 {
		b.WriteString("\n\nResults of earlier goals:\n" + strings.Join(earlier, "\n"))
	}
	if step.Kind == agentfile.LoopStep && iteration > 0 {
		fmt.Fprintf(&b, "\n\nThis is iteration %d of loop %s.", iteration, step.Name)
		if previous != "" {
			b.WriteString(" Your result in the previous iteration:\n" + sanitize.Clip(previous, maxContext))
		}
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
