package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/sandbox/agentfile"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/workflow"
)

// recorder is a provider that answers through a function and records requests.
type recorder struct {
	mu     sync.Mutex
	reqs   []llm.Request
	answer func(req llm.Request, n int) llm.Response
}

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	n := len(r.reqs)
	r.mu.Unlock()
	return r.answer(req, n), nil
}

func (r *recorder) Stream(context.Context, llm.Request) (<-chan llm.Event, error) {
	return nil, errors.New("recorder does not stream")
}

// echoTools has one tool, "note", that fails when its text is "fail".
type echoTools struct {
	mu    sync.Mutex
	calls []string
}

func (e *echoTools) Definitions() []llm.Tool {
	return []llm.Tool{{Name: "note", Description: "take a note", Schema: json.RawMessage(`{"type":"object"}`)}}
}

func (e *echoTools) Run(_ context.Context, call llm.ToolCall) (workflow.ToolResult, error) {
	var a struct{ Text string }
	_ = json.Unmarshal(call.Args, &a)
	e.mu.Lock()
	e.calls = append(e.calls, a.Text)
	e.mu.Unlock()
	if a.Text == "fail" {
		return workflow.ToolResult{Content: "note failed: disk full", IsError: true}, nil
	}
	return workflow.ToolResult{Content: "noted " + a.Text}, nil
}

func parse(t *testing.T, src string) *agentfile.Workflow {
	t.Helper()
	wf, err := agentfile.Parse("Agentfile", src)
	if err != nil {
		t.Fatal(err)
	}
	if err := agentfile.Validate(wf); err != nil {
		t.Fatal(err)
	}
	return wf
}

func TestBindInputs(t *testing.T) {
	t.Parallel()
	wf := parse(t, "NAME w\nINPUT topic\nINPUT n DEFAULT 3\nGOAL g \"$topic $n\"\nRUN r USING g")
	got, err := workflow.BindInputs(wf, map[string]string{"topic": "go"})
	if err != nil || got["topic"] != "go" || got["n"] != "3" {
		t.Errorf("bound %v, %v", got, err)
	}
	if _, err := workflow.BindInputs(wf, map[string]string{}); err == nil || !strings.Contains(err.Error(), "missing required input topic") {
		t.Errorf("missing: %v", err)
	}
	if _, err := workflow.BindInputs(wf, map[string]string{"topic": "x", "colour": "red"}); err == nil || !strings.Contains(err.Error(), "unknown input colour") {
		t.Errorf("unknown: %v", err)
	}
}

func TestRunPassesStateAndInterpolates(t *testing.T) {
	t.Parallel()
	wf := parse(t, "NAME w\nINPUT topic\nGOAL research \"Research $topic\"\nGOAL write \"Write about $topic using $research\"\nRUN r USING research, write")
	p := &recorder{answer: func(req llm.Request, n int) llm.Response {
		return llm.Response{Content: map[int]string{1: "facts about Go", 2: "an essay"}[n], Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}
	}}
	var events []string
	var mu sync.Mutex
	res, err := workflow.Run(t.Context(), wf, map[string]string{"topic": "Go"}, workflow.Options{Provider: p, OnEvent: func(e workflow.Event) {
		mu.Lock()
		events = append(events, e.Type+":"+e.Goal)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "an essay" || res.Outputs["research"] != "facts about Go" || res.Usage.InputTokens != 20 {
		t.Errorf("result %+v", res)
	}
	if got := p.reqs[1].Messages[0].Content; !strings.Contains(got, "Write about Go using facts about Go") {
		t.Errorf("second prompt %q", got)
	}
	if !strings.Contains(p.reqs[0].System, workflow.ConvergedMarker) {
		t.Errorf("system prompt lacks the convergence instruction: %q", p.reqs[0].System)
	}
	want := "workflow_started: step_started: goal_started:research model_reply:research goal_complete:research goal_started:write model_reply:write goal_complete:write step_complete: workflow_complete:"
	if strings.Join(events, " ") != want {
		t.Errorf("events %v", events)
	}
}

func TestToolLoopFeedsResultsBackIncludingFailures(t *testing.T) {
	t.Parallel()
	wf := parse(t, "NAME w\nGOAL g \"do it\"\nRUN r USING g")
	p := &recorder{answer: func(req llm.Request, n int) llm.Response {
		switch n {
		case 1:
			return llm.Response{ToolCalls: []llm.ToolCall{{ID: "a", Name: "note", Args: json.RawMessage(`{"text":"fail"}`)}}}
		case 2:
			return llm.Response{ToolCalls: []llm.ToolCall{{ID: "b", Name: "note", Args: json.RawMessage(`{"text":"ok"}`)}}}
		default:
			return llm.Response{Content: "done"}
		}
	}}
	tools := &echoTools{}
	var roles []string
	var mu sync.Mutex
	res, err := workflow.Run(t.Context(), wf, nil, workflow.Options{Provider: p, Tools: tools, OnMessage: func(goal, agent string, m llm.Message) {
		mu.Lock()
		roles = append(roles, goal+":"+string(m.Role))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(roles, " ") != "g:user g:assistant g:tool g:assistant g:tool g:assistant" {
		t.Errorf("messages seen: %v", roles)
	}
	if res.Output != "done" || len(tools.calls) != 2 {
		t.Fatalf("result %+v, calls %v", res, tools.calls)
	}
	second := p.reqs[1].Messages
	if len(second) != 3 || second[2].Role != llm.ToolRole || !second[2].IsError || second[2].ToolCallID != "a" || !strings.Contains(second[2].Content, "disk full") {
		t.Errorf("failed tool result not sent back: %+v", second)
	}
	if len(p.reqs[0].Tools) != 1 || p.reqs[0].Tools[0].Name != "note" {
		t.Errorf("tools not offered: %+v", p.reqs[0].Tools)
	}
}

func TestLoopConvergence(t *testing.T) {
	t.Parallel()
	toolCall := llm.Response{ToolCalls: []llm.ToolCall{{ID: "x", Name: "note", Args: json.RawMessage(`{"text":"t"}`)}}}
	tests := []struct {
		name   string
		within string
		// answers alternate: tool call then text, per iteration
		text       func(iteration int) string
		useTools   bool
		wantIters  int
		wantReason string
	}{
		{"explicit signal", "5", func(i int) string {
			if i == 2 {
				return "all good\nCONVERGED"
			}
			return "progress " + string(rune('0'+i))
		}, true, 2, "signalled"},
		{"no tool calls", "5", func(int) string { return "nothing to do" }, false, 1, "no_tool_calls"},
		{"state unchanged", "5", func(int) string { return "same" }, true, 2, "state_unchanged"},
		{"within limit", "3", func(i int) string { return "step " + string(rune('0'+i)) }, true, 3, "within_limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wf := parse(t, "NAME w\nINPUT max\nGOAL g \"improve\"\nLOOP l USING g WITHIN $max")
			iteration := 0
			p := &recorder{answer: func(req llm.Request, n int) llm.Response {
				if len(req.Messages) == 1 {
					iteration++
					if tt.useTools {
						return toolCall
					}
				}
				return llm.Response{Content: tt.text(iteration)}
			}}
			res, err := workflow.Run(t.Context(), wf, map[string]string{"max": tt.within}, workflow.Options{Provider: p, Tools: &echoTools{}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Iterations["l"] != tt.wantIters || res.Converged["l"] != tt.wantReason {
				t.Errorf("iterations %d (%s), want %d (%s)", res.Iterations["l"], res.Converged["l"], tt.wantIters, tt.wantReason)
			}
		})
	}
	wf := parse(t, "NAME w\nINPUT max\nGOAL g \"x\"\nLOOP l USING g WITHIN $max")
	if _, err := workflow.Run(t.Context(), wf, map[string]string{"max": "lots"}, workflow.Options{Provider: llm.NewScripted(nil)}); err == nil {
		t.Error("WITHIN of a non-number accepted")
	}
}

func TestMultiAgentGoal(t *testing.T) {
	t.Parallel()
	wf := parse(t, "NAME w\nAGENT a FROM a.md\nAGENT b FROM b.md\nGOAL g \"judge\" USING a, b\nRUN r USING g")
	wf.Agents[0].Prompt, wf.Agents[1].Prompt = "You are Alice.", "You are Bob."
	p := &recorder{answer: func(req llm.Request, n int) llm.Response {
		switch {
		case strings.HasPrefix(req.System, "You are Alice."):
			return llm.Response{Content: "alice says yes"}
		case strings.HasPrefix(req.System, "You are Bob."):
			return llm.Response{Content: "bob says no"}
		default:
			return llm.Response{Content: "synthesis"}
		}
	}}
	res, err := workflow.Run(t.Context(), wf, nil, workflow.Options{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "synthesis" || len(p.reqs) != 3 {
		t.Fatalf("result %+v after %d calls", res, len(p.reqs))
	}
	last := p.reqs[2].Messages[0].Content
	if !strings.Contains(last, "alice says yes") || !strings.Contains(last, "bob says no") || !strings.Contains(last, "Reconcile") {
		t.Errorf("synthesis prompt %q", last)
	}
}

func TestResumeSkipsCompletedGoals(t *testing.T) {
	t.Parallel()
	wf := parse(t, "NAME w\nGOAL a \"first\"\nGOAL b \"second after $a\"\nRUN r USING a, b")
	p := &recorder{answer: func(req llm.Request, n int) llm.Response { return llm.Response{Content: "b done"} }}
	var saved []string
	res, err := workflow.Run(t.Context(), wf, nil, workflow.Options{Provider: p, Done: map[string]string{"a": "a was done"},
		OnGoal: func(goal string, outputs map[string]string) error {
			saved = append(saved, goal+"="+outputs[goal])
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.reqs) != 1 || !strings.Contains(p.reqs[0].Messages[0].Content, "second after a was done") {
		t.Errorf("resume ran %d calls: %+v", len(p.reqs), p.reqs)
	}
	if res.Output != "b done" || strings.Join(saved, ",") != "b=b done" {
		t.Errorf("result %+v, saved %v", res, saved)
	}
}

// BenchmarkToolLoopStep measures the workflow engine's own cost for one goal
// of one tool turn: a scripted model asks for a tool, the tool answers, the
// model replies; no network, so what is left is the loop's overhead per step.
func BenchmarkToolLoopStep(b *testing.B) {
	wf, _ := agentfile.Parse("A", "NAME w\nGOAL g \"x\"\nRUN r USING g")
	raw := `{"tool_calls":[{"name":"note","args":{"text":"t"}}]}` + "\n" + `{"text":"done"}`
	steps, err := llm.ParseScript([]byte(raw))
	if err != nil {
		b.Fatal(err)
	}
	tools := &echoTools{}
	rec := benchrec.New(b)
	for b.Loop() {
		began := time.Now()
		if _, err := workflow.Run(context.Background(), wf, nil, workflow.Options{Provider: llm.NewScripted(steps), Tools: tools}); err != nil {
			b.Fatal(err)
		}
		rec.Add("step", time.Since(began))
	}
	rec.Done()
}

func TestGoalConversationEndsAtMaxToolTurns(t *testing.T) {
	t.Parallel()
	wf := parse(t, "NAME w\nGOAL g \"do it\"\nRUN r USING g")
	p := &recorder{answer: func(llm.Request, int) llm.Response {
		return llm.Response{ToolCalls: []llm.ToolCall{{ID: "a", Name: "note", Args: json.RawMessage(`{"text":"again"}`)}}}
	}}
	var events []string
	_, err := workflow.Run(t.Context(), wf, nil, workflow.Options{Provider: p, Tools: &echoTools{}, MaxToolTurns: 2, OnEvent: func(e workflow.Event) {
		events = append(events, e.Type)
	}})
	if !errors.Is(err, llm.ErrMaxTurns) || err.Error() != "goal g: no answer after 2 model calls" || len(p.reqs) != 2 {
		t.Errorf("error %v after %d model calls", err, len(p.reqs))
	}
	want := "workflow_started step_started goal_started model_reply tool_call model_reply tool_call error"
	if strings.Join(events, " ") != want {
		t.Errorf("events %v", events)
	}
}

// TestSequentialVariables: a goal may share an input's name. $draft is the
// input until goal draft has produced output, and goal draft's output after;
// in goal draft's own prompt it is the input, however often it runs.
func TestSequentialVariables(t *testing.T) {
	t.Parallel()
	wf := parse(t, "NAME w\nINPUT draft\nGOAL draft \"Improve $draft\"\nGOAL review \"Review $draft\"\nRUN first USING draft, review\nRUN again USING draft")
	p := &recorder{answer: func(req llm.Request, n int) llm.Response {
		return llm.Response{Content: map[int]string{1: "better text", 2: "looks fine", 3: "best text", 4: "done"}[n]}
	}}
	if _, err := workflow.Run(t.Context(), wf, map[string]string{"draft": "rough text"}, workflow.Options{Provider: p}); err != nil {
		t.Fatal(err)
	}
	prompts := make([]string, len(p.reqs))
	for i, r := range p.reqs {
		prompts[i] = r.Messages[0].Content
	}
	if len(prompts) < 3 {
		t.Fatalf("%d model calls", len(prompts))
	}
	if !strings.Contains(prompts[0], "Improve rough text") || !strings.Contains(prompts[1], "Review better text") ||
		!strings.Contains(prompts[2], "Improve rough text") {
		t.Errorf("prompts:\n%s", strings.Join(prompts, "\n---\n"))
	}
	if strings.Contains(prompts[0], "Results of earlier goals") {
		t.Errorf("the input was shown as a goal's result:\n%s", prompts[0])
	}
}

// TestSystemStartsEverySystemPrompt: Options.System (a sandbox's
// guardrails) comes first in the system prompt of every goal.
func TestSystemStartsEverySystemPrompt(t *testing.T) {
	wf := parse(t, "NAME w\nGOAL a \"Do a.\"\nGOAL b \"Do b.\"\nRUN main USING a, b\n")
	rec := &recorder{answer: func(llm.Request, int) llm.Response { return llm.Response{Content: "done"} }}
	if _, err := workflow.Run(t.Context(), wf, nil, workflow.Options{System: "# Rules\nBe safe.", Provider: rec}); err != nil {
		t.Fatal(err)
	}
	if len(rec.reqs) < 2 {
		t.Fatalf("%d requests", len(rec.reqs))
	}
	for i, req := range rec.reqs {
		if !strings.HasPrefix(req.System, "# Rules\nBe safe.\n\n") {
			t.Errorf("request %d: system %q", i, req.System)
		}
	}
}
