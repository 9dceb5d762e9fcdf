package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultMaxTurns bounds the model calls of one Run when Loop.MaxTurns is not set.
const DefaultMaxTurns = 25

// Errors that end a Run besides the callers' own.
var (
	// ErrTokenLimit ends a Run whose conversation has used more tokens than
	// Loop.TokenLimit allows.
	ErrTokenLimit = errors.New("token limit reached")
	// ErrMaxTurns ends a Run whose model still called tools after Loop.MaxTurns
	// model calls.
	ErrMaxTurns = errors.New("no answer")
)

// ModelError is a model call that failed. Run returns it so that callers can
// tell a model that could not be reached from their hooks' and tools' errors.
type ModelError struct{ Err error }

// Error says the model call failed, and why.
func (e *ModelError) Error() string { return "model call: " + e.Err.Error() }

// Unwrap returns the provider's error.
func (e *ModelError) Unwrap() error { return e.Err }

// ToolResult is what a tool gives back; a failed tool is content for the model.
type ToolResult struct {
	Content string
	IsError bool
}

// Tools runs the tools a model may call.
type Tools interface {
	// Definitions are the tools as the model sees them.
	Definitions() []Tool
	// Run runs one call. A tool that fails returns a result with IsError; an error
	// means the run itself cannot go on (typically the context's error).
	Run(ctx context.Context, call ToolCall) (ToolResult, error)
}

// Conversation is what a Loop works on: the messages so far, which a Run adds
// the model's replies and the tool results to, and the tokens they have cost.
type Conversation struct {
	Messages []Message
	Usage    Usage
}

// LoopEventType names a step of a Run.
type LoopEventType string

// The steps of a Run, in the order they happen for each model call: the reply,
// then for each of its tool calls the start and the result.
const (
	ModelReplied LoopEventType = "model_replied"
	ToolStarted  LoopEventType = "tool_started"
	ToolFinished LoopEventType = "tool_finished"
)

// LoopEvent is one step of a Run, as Loop.OnEvent sees it.
type LoopEvent struct {
	Type LoopEventType
	// Message is the model's reply (ModelReplied) or the tool's result as the
	// model will see it (ToolFinished); it is already in the conversation.
	Message Message
	// Call is the tool call (ToolStarted, ToolFinished).
	Call ToolCall
	// Response is the model's whole response (ModelReplied): its usage and model.
	Response Response
	// Usage is what the conversation has used so far, this reply included.
	Usage Usage
	// Latency is how long the model call (ModelReplied) or the tool
	// (ToolFinished) took.
	Latency time.Duration
}

// Loop is the agent loop: it calls the model, runs the tool calls of its reply,
// gives the results back and repeats until the model answers without calling a
// tool. A tool that fails goes back to the model as content; only a Go error (a
// failed model call, a tool's or a hook's error, a limit) ends a Run early. A Loop
// holds no state of its own: one may run several conversations at once.
type Loop struct {
	Provider  Provider
	Model     string
	System    string
	MaxTokens int
	// Tools are the tools the model may call; nil: none, and a call is an error.
	Tools Tools
	// MaxTurns bounds the model calls of one Run (default DefaultMaxTurns).
	MaxTurns int
	// TokenLimit, if positive, ends a Run with ErrTokenLimit as soon as a reply
	// takes the conversation's input and output tokens over it.
	TokenLimit int
	// Stop, if set, is asked after the tool calls of each reply have run, with
	// the reply and the results; true ends the Run without another model call (a
	// tool that signals the goal is met, a conversation that has converged).
	Stop func(reply Message, results []Message) bool
	// OnEvent, if set, sees every step as it happens; an error ends the Run with
	// that error.
	OnEvent func(ctx context.Context, e LoopEvent) error
	// OnDelta, if set, has each model call streamed (Provider.Stream instead
	// of Chat) and sees the pieces of the reply's text as they arrive, in
	// order, before OnEvent sees the whole reply (ModelReplied).
	OnDelta func(ctx context.Context, text string)
}

// Outcome is how a Run ended.
type Outcome struct {
	// Reply is the model's last response; its Content is the answer.
	Reply Response
	// Calls counts the model calls, ToolCalls the tool calls run.
	Calls, ToolCalls int
	// Stopped says that Stop ended the Run.
	Stopped bool
}

// Run continues c until the model answers without calling a tool, Stop says so or
// a limit is reached. c keeps what was added even when Run fails. The errors are
// a *ModelError, ErrTokenLimit, ErrMaxTurns (wrapped), a tool's error (wrapped)
// and OnEvent's errors (as they are).
func (l *Loop) Run(ctx context.Context, c *Conversation) (Outcome, error) {
	maxTurns := l.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	var defs []Tool
	if l.Tools != nil {
		defs = l.Tools.Definitions()
	}
	var out Outcome
	for range maxTurns {
		began := time.Now()
		res, err := l.call(ctx, Request{Model: l.Model, System: l.System, Messages: c.Messages, Tools: defs, MaxTokens: l.MaxTokens})
		if err != nil {
			return out, &ModelError{Err: err}
		}
		latency := time.Since(began)
		out.Calls++
		out.Reply = res
		c.Usage = c.Usage.Add(res.Usage)
		reply := Message{Role: Assistant, Content: res.Content, ToolCalls: res.ToolCalls}
		c.Messages = append(c.Messages, reply)
		if err := l.event(ctx, LoopEvent{Type: ModelReplied, Message: reply, Response: res, Usage: c.Usage, Latency: latency}); err != nil {
			return out, err
		}
		if l.TokenLimit > 0 && c.Usage.InputTokens+c.Usage.OutputTokens > l.TokenLimit {
			return out, ErrTokenLimit
		}
		if len(res.ToolCalls) == 0 {
			return out, nil
		}
		if l.Tools == nil {
			return out, errors.New("the model called a tool, but no tools are available")
		}
		results, err := l.runTools(ctx, c, res.ToolCalls)
		out.ToolCalls += len(results)
		if err != nil {
			return out, err
		}
		if l.Stop != nil && l.Stop(reply, results) {
			out.Stopped = true
			return out, nil
		}
	}
	return out, fmt.Errorf("%w after %d model calls", ErrMaxTurns, maxTurns)
}

// errNoReply is a stream that ended without its Done.
var errNoReply = errors.New("the model's stream ended without a reply")

// call makes one model call: Chat, or with OnDelta a stream, whose text
// pieces OnDelta sees and whose Done is the reply.
func (l *Loop) call(ctx context.Context, req Request) (Response, error) {
	if l.OnDelta == nil {
		return l.Provider.Chat(ctx, req)
	}
	ch, err := l.Provider.Stream(ctx, req)
	if err != nil {
		return Response{}, err
	}
	for e := range ch {
		switch e.Type {
		case TextDelta:
			if e.Text != "" {
				l.OnDelta(ctx, e.Text)
			}
		case Failed:
			go drain(ch) // the provider closes it next: never leave it blocked
			return Response{}, cmp.Or(e.Err, errNoReply)
		case Done:
			go drain(ch)
			if e.Response == nil {
				return Response{}, errNoReply
			}
			return *e.Response, nil
		}
	}
	if err := context.Cause(ctx); err != nil {
		return Response{}, err
	}
	return Response{}, errNoReply
}

// drain reads ch until it is closed.
func drain(ch <-chan Event) {
	for range ch {
	}
}

// runTools runs the calls in order and adds their results to c.
func (l *Loop) runTools(ctx context.Context, c *Conversation, calls []ToolCall) ([]Message, error) {
	var results []Message
	for _, call := range calls {
		if err := l.event(ctx, LoopEvent{Type: ToolStarted, Call: call, Usage: c.Usage}); err != nil {
			return results, err
		}
		began := time.Now()
		res, err := l.Tools.Run(ctx, call)
		if err != nil {
			return results, fmt.Errorf("tool %s: %w", call.Name, err)
		}
		result := Message{Role: ToolRole, ToolCallID: call.ID, Content: res.Content, IsError: res.IsError}
		c.Messages = append(c.Messages, result)
		results = append(results, result)
		if err := l.event(ctx, LoopEvent{Type: ToolFinished, Message: result, Call: call, Usage: c.Usage, Latency: time.Since(began)}); err != nil {
			return results, err
		}
	}
	return results, nil
}

func (l *Loop) event(ctx context.Context, e LoopEvent) error {
	if l.OnEvent == nil {
		return nil
	}
	return l.OnEvent(ctx, e)
}
