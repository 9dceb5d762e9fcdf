package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// chatFunc is a provider that answers through a function: n counts the calls from 1.
type chatFunc func(req llm.Request, n int) (llm.Response, error)

type fakeProvider struct {
	answer chatFunc
	reqs   []llm.Request
}

func (p *fakeProvider) Name() string { return "fake" }

func (p *fakeProvider) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	p.reqs = append(p.reqs, req)
	return p.answer(req, len(p.reqs))
}

func (p *fakeProvider) Stream(context.Context, llm.Request) (<-chan llm.Event, error) {
	return nil, errors.New("fake does not stream")
}

// fakeTools has one tool, "note", run by a function.
type fakeTools struct {
	run   func(call llm.ToolCall) (llm.ToolResult, error)
	calls []string
}

func (f *fakeTools) Definitions() []llm.Tool {
	return []llm.Tool{{Name: "note", Description: "take a note", Schema: json.RawMessage(`{"type":"object"}`)}}
}

func (f *fakeTools) Run(_ context.Context, call llm.ToolCall) (llm.ToolResult, error) {
	f.calls = append(f.calls, string(call.Args))
	if f.run == nil {
		return llm.ToolResult{Content: "noted " + string(call.Args)}, nil
	}
	return f.run(call)
}

func script(t *testing.T, jsonl string) *llm.Scripted {
	t.Helper()
	steps, err := llm.ParseScript([]byte(jsonl))
	if err != nil {
		t.Fatal(err)
	}
	return llm.NewScripted(steps)
}

func start(text string) *llm.Conversation {
	return &llm.Conversation{Messages: []llm.Message{{Role: llm.User, Content: text}}}
}

func roles(msgs []llm.Message) string {
	var rs []string
	for _, m := range msgs {
		rs = append(rs, string(m.Role))
	}
	return strings.Join(rs, " ")
}

// toolCall answers every call with a call of the note tool.
func toolCall(usage llm.Usage) chatFunc {
	return func(_ llm.Request, n int) (llm.Response, error) {
		return llm.Response{Content: fmt.Sprint("step ", n), Usage: usage,
			ToolCalls: []llm.ToolCall{{ID: fmt.Sprint("c", n), Name: "note", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}}}, nil
	}
}

func TestLoopSendsToolFailuresBackAsContent(t *testing.T) {
	t.Parallel()
	p := script(t, `{"text":"trying","tool_calls":[{"id":"a","name":"note","args":{"text":"fail"}}],"usage":{"input_tokens":10,"output_tokens":2}}
{"text":"it failed, so I stop","usage":{"input_tokens":20,"output_tokens":3}}`)
	tools := &fakeTools{run: func(llm.ToolCall) (llm.ToolResult, error) {
		return llm.ToolResult{Content: "note failed: disk full", IsError: true}, nil
	}}
	c := start("take a note")
	out, err := (&llm.Loop{Provider: p, Tools: tools}).Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if out.Reply.Content != "it failed, so I stop" || out.Calls != 2 || out.ToolCalls != 1 || out.Stopped {
		t.Errorf("outcome %+v", out)
	}
	if got := roles(c.Messages); got != "user assistant tool assistant" {
		t.Fatalf("conversation %s", got)
	}
	if res := c.Messages[2]; !res.IsError || res.ToolCallID != "a" || res.Content != "note failed: disk full" {
		t.Errorf("failed tool result %+v", res)
	}
	if c.Usage != (llm.Usage{InputTokens: 30, OutputTokens: 5}) {
		t.Errorf("usage %+v", c.Usage)
	}
}

func TestLoopOffersToolsAndSendsTheConversation(t *testing.T) {
	t.Parallel()
	p := &fakeProvider{answer: func(req llm.Request, n int) (llm.Response, error) {
		if n == 1 {
			return toolCall(llm.Usage{})(req, n)
		}
		return llm.Response{Content: "done"}, nil
	}}
	l := &llm.Loop{Provider: p, Model: "m", System: "be brief", MaxTokens: 99, Tools: &fakeTools{}}
	if _, err := l.Run(t.Context(), start("go")); err != nil {
		t.Fatal(err)
	}
	if len(p.reqs) != 2 {
		t.Fatalf("%d model calls", len(p.reqs))
	}
	first, second := p.reqs[0], p.reqs[1]
	if first.Model != "m" || first.System != "be brief" || first.MaxTokens != 99 || len(first.Tools) != 1 || first.Tools[0].Name != "note" {
		t.Errorf("first request %+v", first)
	}
	if got := roles(second.Messages); got != "user assistant tool" || second.Messages[2].Content != `noted {"n":1}` {
		t.Errorf("second request's messages %+v", second.Messages)
	}
}

func TestLoopEnds(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name      string
		answer    chatFunc
		loop      llm.Loop
		usedSoFar llm.Usage
		toolErr   error
		// check reports what is wrong with the error, "" if nothing.
		check     func(err error) string
		wantCalls int
		wantTools int
		wantRoles string
	}{
		{
			name: "the model answers", answer: func(llm.Request, int) (llm.Response, error) { return llm.Response{Content: "hi"}, nil },
			check: wantNil, wantCalls: 1, wantRoles: "user assistant",
		},
		{
			name: "max turns", answer: toolCall(llm.Usage{}), loop: llm.Loop{MaxTurns: 3},
			check: func(err error) string {
				if !errors.Is(err, llm.ErrMaxTurns) || err.Error() != "no answer after 3 model calls" {
					return "want ErrMaxTurns after 3 model calls"
				}
				return ""
			},
			wantCalls: 3, wantTools: 3, wantRoles: "user assistant tool assistant tool assistant tool",
		},
		{
			name: "default max turns", answer: toolCall(llm.Usage{}),
			check: wantIs(llm.ErrMaxTurns), wantCalls: llm.DefaultMaxTurns, wantTools: llm.DefaultMaxTurns,
		},
		{
			// 8 tokens a reply: 8, 16, 24 > 20 on the third, whose tool does not run.
			name: "token limit", answer: toolCall(llm.Usage{InputTokens: 5, OutputTokens: 3}), loop: llm.Loop{TokenLimit: 20},
			check: wantIs(llm.ErrTokenLimit), wantCalls: 3, wantTools: 2,
			wantRoles: "user assistant tool assistant tool assistant",
		},
		{
			name: "token limit counts earlier runs", answer: toolCall(llm.Usage{InputTokens: 5, OutputTokens: 3}), loop: llm.Loop{TokenLimit: 20},
			usedSoFar: llm.Usage{InputTokens: 13}, check: wantIs(llm.ErrTokenLimit), wantCalls: 1, wantRoles: "user assistant",
		},
		{
			name: "token limit reached by the answer", answer: func(llm.Request, int) (llm.Response, error) {
				return llm.Response{Content: "long answer", Usage: llm.Usage{OutputTokens: 21}}, nil
			}, loop: llm.Loop{TokenLimit: 20},
			check: wantIs(llm.ErrTokenLimit), wantCalls: 1, wantRoles: "user assistant",
		},
		{
			name: "token limit not exceeded", answer: func(llm.Request, int) (llm.Response, error) {
				return llm.Response{Content: "answer", Usage: llm.Usage{OutputTokens: 20}}, nil
			}, loop: llm.Loop{TokenLimit: 20},
			check: wantNil, wantCalls: 1, wantRoles: "user assistant",
		},
		{
			name: "model error", answer: func(llm.Request, int) (llm.Response, error) { return llm.Response{}, boom },
			check: func(err error) string {
				if me, ok := errors.AsType[*llm.ModelError](err); !ok || !errors.Is(me, boom) {
					return "want a *ModelError wrapping the provider's error"
				}
				return ""
			},
			wantRoles: "user",
		},
		{
			name: "tool error", answer: toolCall(llm.Usage{}), toolErr: boom,
			check: func(err error) string {
				if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "tool note: ") {
					return "want the tool's error, wrapped with the tool's name"
				}
				if _, ok := errors.AsType[*llm.ModelError](err); ok {
					return "a tool's error is not the model's"
				}
				return ""
			},
			wantCalls: 1, wantRoles: "user assistant",
		},
		{
			name: "no tools", answer: toolCall(llm.Usage{}), loop: llm.Loop{Tools: llm.Tools(nil)},
			check: func(err error) string {
				if err == nil || !strings.Contains(err.Error(), "no tools are available") {
					return "want an error saying no tools are available"
				}
				return ""
			},
			wantCalls: 1, wantRoles: "user assistant",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tools := &fakeTools{}
			if tt.toolErr != nil {
				tools.run = func(llm.ToolCall) (llm.ToolResult, error) { return llm.ToolResult{}, tt.toolErr }
			}
			l := tt.loop
			l.Provider = &fakeProvider{answer: tt.answer}
			if tt.name != "no tools" {
				l.Tools = tools
			}
			c := start("go")
			c.Usage = tt.usedSoFar
			out, err := l.Run(t.Context(), c)
			if problem := tt.check(err); problem != "" {
				t.Errorf("error %v: %s", err, problem)
			}
			attempted := tt.wantTools
			if tt.toolErr != nil {
				attempted++ // the call that failed
			}
			if out.Calls != tt.wantCalls || out.ToolCalls != tt.wantTools || len(tools.calls) != attempted {
				t.Errorf("%d model calls, %d tool calls (%d attempted), want %d and %d (%d)", out.Calls, out.ToolCalls, len(tools.calls), tt.wantCalls, tt.wantTools, attempted)
			}
			if got := roles(c.Messages); tt.wantRoles != "" && got != tt.wantRoles {
				t.Errorf("conversation %s, want %s", got, tt.wantRoles)
			}
		})
	}
}

func wantNil(err error) string {
	if err != nil {
		return "want no error"
	}
	return ""
}

func wantIs(target error) func(error) string {
	return func(err error) string {
		if !errors.Is(err, target) {
			return fmt.Sprintf("want %v", target)
		}
		return ""
	}
}

func TestLoopStop(t *testing.T) {
	t.Parallel()
	// The note tool says the goal is met on its second call; the model would go on.
	tools := &fakeTools{run: func(call llm.ToolCall) (llm.ToolResult, error) {
		if string(call.Args) == `{"n":2}` {
			return llm.ToolResult{Content: "goal met"}, nil
		}
		return llm.ToolResult{Content: "not yet"}, nil
	}}
	var asked []string
	l := &llm.Loop{Provider: &fakeProvider{answer: toolCall(llm.Usage{})}, Tools: tools, Stop: func(reply llm.Message, results []llm.Message) bool {
		asked = append(asked, reply.Content)
		return len(results) == 1 && results[0].Content == "goal met"
	}}
	c := start("go")
	out, err := l.Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Stopped || out.Calls != 2 || out.ToolCalls != 2 || out.Reply.Content != "step 2" {
		t.Errorf("outcome %+v", out)
	}
	if strings.Join(asked, ",") != "step 1,step 2" {
		t.Errorf("Stop asked after %v", asked)
	}
	if got := roles(c.Messages); got != "user assistant tool assistant tool" {
		t.Errorf("conversation %s", got)
	}
}

func TestLoopEventsInOrder(t *testing.T) {
	t.Parallel()
	p := script(t, `{"text":"two notes","tool_calls":[{"id":"a","name":"note","args":{"text":"x"}},{"id":"b","name":"note","args":{"text":"y"}}],"usage":{"input_tokens":10,"output_tokens":1}}
{"text":"done","usage":{"input_tokens":20,"output_tokens":2}}`)
	tools := &fakeTools{run: func(call llm.ToolCall) (llm.ToolResult, error) {
		return llm.ToolResult{Content: "out " + call.ID, IsError: call.ID == "b"}, nil
	}}
	c := start("go")
	var got []string
	l := &llm.Loop{Provider: p, Tools: tools, OnEvent: func(_ context.Context, e llm.LoopEvent) error {
		last := c.Messages[len(c.Messages)-1]
		var s string
		switch e.Type {
		case llm.ModelReplied:
			s = fmt.Sprintf("reply %q calls=%d usage=%d/%d total=%d/%d", e.Message.Content, len(e.Message.ToolCalls),
				e.Response.Usage.InputTokens, e.Response.Usage.OutputTokens, e.Usage.InputTokens, e.Usage.OutputTokens)
			if last.Role != llm.Assistant || last.Content != e.Message.Content {
				s += " (not yet in the conversation)"
			}
		case llm.ToolStarted:
			s = "start " + e.Call.ID
		case llm.ToolFinished:
			s = fmt.Sprintf("result %s %q error=%t", e.Call.ID, e.Message.Content, e.Message.IsError)
			if last.Role != llm.ToolRole || last.ToolCallID != e.Call.ID || e.Message.ToolCallID != e.Call.ID {
				s += " (not yet in the conversation)"
			}
		}
		got = append(got, s)
		return nil
	}}
	if _, err := l.Run(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`reply "two notes" calls=2 usage=10/1 total=10/1`,
		"start a",
		`result a "out a" error=false`,
		"start b",
		`result b "out b" error=true`,
		`reply "done" calls=0 usage=20/2 total=30/3`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoopHookErrorEndsTheRun(t *testing.T) {
	t.Parallel()
	full := errors.New("event log full")
	for _, at := range []llm.LoopEventType{llm.ModelReplied, llm.ToolStarted, llm.ToolFinished} {
		t.Run(string(at), func(t *testing.T) {
			t.Parallel()
			tools := &fakeTools{}
			l := &llm.Loop{Provider: &fakeProvider{answer: toolCall(llm.Usage{})}, Tools: tools, OnEvent: func(_ context.Context, e llm.LoopEvent) error {
				if e.Type == at {
					return full
				}
				return nil
			}}
			out, err := l.Run(t.Context(), start("go"))
			if !errors.Is(err, full) || out.Calls != 1 {
				t.Errorf("%+v, %v; want the hook's error after one model call", out, err)
			}
			if wantRun := at == llm.ToolFinished; (len(tools.calls) == 1) != wantRun {
				t.Errorf("tools run: %v", tools.calls)
			}
		})
	}
}

// streamer is a provider that streams each call's events from calls; a call
// past them, and Chat, fail.
type streamer struct {
	calls [][]llm.Event
	// between, if set, runs after the first event of each stream is sent,
	// before the others are.
	between func() error
	n       int
}

func (p *streamer) Name() string { return "streamer" }

func (p *streamer) Chat(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{}, errors.New("streamer does not chat")
}

func (p *streamer) Stream(context.Context, llm.Request) (<-chan llm.Event, error) {
	if p.n >= len(p.calls) {
		return nil, errors.New("no more streams")
	}
	events := p.calls[p.n]
	p.n++
	ch := make(chan llm.Event) // unbuffered: each event is sent when it is read
	go func() {
		defer close(ch)
		for i, e := range events {
			ch <- e
			if i == 0 && p.between != nil {
				if err := p.between(); err != nil {
					ch <- llm.Event{Type: llm.Failed, Err: err}
					return
				}
			}
		}
	}()
	return ch, nil
}

func text(s string) llm.Event { return llm.Event{Type: llm.TextDelta, Text: s} }

func done(res llm.Response) llm.Event { return llm.Event{Type: llm.Done, Response: &res} }

// TestLoopStreams: with OnDelta, each model call is streamed: OnDelta sees
// the pieces as they arrive, in order and before the reply's event, and the
// reply is the Done event's response (its tool calls and usage).
func TestLoopStreams(t *testing.T) {
	t.Parallel()
	call := llm.ToolCall{ID: "a", Name: "note", Args: json.RawMessage(`{"n":1}`)}
	seen := make(chan struct{}, 1)
	p := &streamer{
		calls: [][]llm.Event{
			{text("Let "), text("me "), text("note."), {Type: llm.ToolCallDone, ToolCall: &call},
				done(llm.Response{Content: "Let me note.", ToolCalls: []llm.ToolCall{call}, Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}})},
			{text("Noted."), done(llm.Response{Content: "Noted.", Usage: llm.Usage{InputTokens: 20, OutputTokens: 1}})},
		},
		// The stream goes on only once OnDelta has seen its first piece.
		between: func() error {
			select {
			case <-seen:
				return nil
			case <-time.After(10 * time.Second):
				return errors.New("OnDelta did not see the first piece before the rest came")
			}
		},
	}
	var got []string
	c := start("go")
	l := &llm.Loop{Provider: p, Tools: &fakeTools{},
		OnDelta: func(_ context.Context, text string) {
			got = append(got, "delta "+text)
			select {
			case seen <- struct{}{}:
			default:
			}
		},
		OnEvent: func(_ context.Context, e llm.LoopEvent) error {
			if e.Type == llm.ModelReplied {
				got = append(got, fmt.Sprintf("reply %q calls=%d usage=%d/%d", e.Message.Content, len(e.Message.ToolCalls), e.Usage.InputTokens, e.Usage.OutputTokens))
			}
			return nil
		}}
	out, err := l.Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`delta Let `, `delta me `, `delta note.`, `reply "Let me note." calls=1 usage=10/3`, `delta Noted.`, `reply "Noted." calls=0 usage=30/4`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("seen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if out.Calls != 2 || out.ToolCalls != 1 || c.Usage != (llm.Usage{InputTokens: 30, OutputTokens: 4}) || roles(c.Messages) != "user assistant tool assistant" {
		t.Errorf("outcome %+v, usage %+v, conversation %s", out, c.Usage, roles(c.Messages))
	}
}

// TestLoopStreamFailures: a stream that fails, ends without its Done or
// cannot start is the model's error, as a failed Chat is.
func TestLoopStreamFailures(t *testing.T) {
	t.Parallel()
	boom := errors.New("overloaded")
	tests := []struct {
		name   string
		events []llm.Event
		want   error
	}{
		{"failed", []llm.Event{text("Hel"), {Type: llm.Failed, Err: boom}}, boom},
		{"failed without an error", []llm.Event{{Type: llm.Failed}}, nil},
		{"closed without done", []llm.Event{text("Hel")}, nil},
		{"done without a response", []llm.Event{{Type: llm.Done}}, nil},
		{"no stream", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &streamer{calls: [][]llm.Event{tt.events}}
			if tt.events == nil {
				p.calls = nil
			}
			c := start("go")
			out, err := (&llm.Loop{Provider: p, OnDelta: func(context.Context, string) {}}).Run(t.Context(), c)
			me, ok := errors.AsType[*llm.ModelError](err)
			if !ok || (tt.want != nil && !errors.Is(me, tt.want)) {
				t.Errorf("error %v, want a *ModelError wrapping %v", err, tt.want)
			}
			if out.Calls != 0 || roles(c.Messages) != "user" {
				t.Errorf("outcome %+v, conversation %s", out, roles(c.Messages))
			}
		})
	}
}

// TestLoopWithoutOnDeltaChats: without OnDelta the model is called whole.
func TestLoopWithoutOnDeltaChats(t *testing.T) {
	t.Parallel()
	p := &streamer{calls: [][]llm.Event{{done(llm.Response{Content: "streamed"})}}}
	_, err := (&llm.Loop{Provider: p}).Run(t.Context(), start("go"))
	if err == nil || !strings.Contains(err.Error(), "streamer does not chat") || p.n != 0 {
		t.Errorf("error %v after %d streams; want Chat's", err, p.n)
	}
}
