package remote

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/sanitize"
)

// Limits of one conversation turn.
const (
	maxTurnCalls  = 25
	maxEventChars = sandboxwire.MaxEventTextChars
)

// Brain is what answers in a sandbox: the model, its tools and the token budget.
type Brain struct {
	Provider llm.Provider
	Model    string
	Tools    llm.Tools
	// TokenLimit stops the session once input+output tokens exceed it; 0: none.
	TokenLimit int
	MaxTokens  int
	// ContextWindow is the model's context size in tokens, shown against what
	// the conversation holds.
	ContextWindow int
}

// NewBrain builds the brain c configures: its model (c.LLM, a scripted
// provider's script relative to the workspace), token budget and context window.
// Its tools work in the workspace under the default policy, and their failures
// are sanitised before the model or anyone else sees them. extra, if not nil,
// registers more tools (the contract tools). enabled, if not nil, are the
// only workspace tools it registers (the session's agent type's; see
// sandboxwire.Spec.Tools): a call to any other tool is refused.
func NewBrain(c Config, enabled []string, extra func(*tools.Registry, *policy.Policy) error) (*Brain, error) {
	provider, err := providers.New(c.LLM, c.Workspace)
	if err != nil {
		return nil, err
	}
	pol, err := policy.New(policy.Defaults(), c.Workspace)
	if err != nil {
		return nil, err
	}
	o := tools.Options{MemoryPath: filepath.Join(pol.Workspace(), ".agent", "memory.json"), User: c.ToolUser, Enabled: enabled}
	if c.Tools != nil {
		o.Env = c.Tools.Environ
	}
	reg, err := tools.New(pol, o)
	if err != nil {
		return nil, err
	}
	if extra != nil {
		if err := extra(reg, pol); err != nil {
			return nil, err
		}
	}
	return &Brain{Provider: provider, Model: c.LLM.Model, Tools: tools.Sanitised{Tools: reg, Secrets: c.Secrets}, TokenLimit: c.TokenLimit, MaxTokens: c.LLM.MaxTokens,
		ContextWindow: cmp.Or(c.ContextWindow, agentconfig.DefaultContextWindow)}, nil
}

// conversation is the agent's running conversation in a sandbox.
type conversation struct {
	brain *Brain
	cl    *gateway.Client
	// secrets are hidden from the tool calls' arguments in events.
	secrets *redact.Secrets
	system  string
	msgs    []llm.Message
	used    llm.Usage
	log     *slog.Logger
	// watched says whether a viewer watches the agent: its live events are
	// posted only then. nil: always.
	watched *watchState
}

// errTokenLimit stops the session when its budget is spent.
var errTokenLimit = llm.ErrTokenLimit

// turn answers the last user message: model calls and tool calls until the model
// replies without tools, reporting working, every message and tool call, and idle.
// A model that cannot be reached or keeps calling tools ends the turn, not the
// session; a spent token budget ends the session (errTokenLimit).
func (c *conversation) turn(ctx context.Context) error {
	if err := c.state(ctx, sandboxwire.Working); err != nil {
		return err
	}
	// The turn's live view: each reply's text as it is written, each tool
	// call as it starts, all posted before the turn reports anything else.
	view := &liveView{sender: c.cl.Live(ctx, c.log), secrets: c.secrets, watched: c.watched}
	loop := llm.Loop{Provider: c.brain.Provider, Model: c.brain.Model, System: c.system, MaxTokens: c.brain.MaxTokens,
		Tools: c.brain.Tools, MaxTurns: maxTurnCalls, TokenLimit: c.brain.TokenLimit, OnDelta: view.delta,
		OnEvent: func(ctx context.Context, e llm.LoopEvent) error { return c.report(ctx, view, e) }}
	conv := llm.Conversation{Messages: c.msgs, Usage: c.used}
	_, err := loop.Run(ctx, &conv)
	view.sender.Close()
	c.msgs, c.used = conv.Messages, conv.Usage
	if ctx.Err() != nil {
		return ctx.Err() // stopped (an end, a pause): the sandbox reports what it does
	}
	if model, ok := errors.AsType[*llm.ModelError](err); ok {
		_ = c.emit(ctx, sandboxwire.AgentError{Text: "The model could not be reached; try again."})
		c.log.Warn("model call failed", slog.String("error", model.Err.Error()))
		return c.state(ctx, sandboxwire.Idle)
	}
	switch {
	case errors.Is(err, llm.ErrTokenLimit):
		_ = c.emit(ctx, sandboxwire.TokenLimit{Limit: c.brain.TokenLimit, Used: c.used.InputTokens + c.used.OutputTokens})
		return errTokenLimit
	case errors.Is(err, llm.ErrMaxTurns):
		_ = c.emit(ctx, sandboxwire.AgentError{Text: "The agent stopped after too many steps for one message."})
	case err != nil:
		return err
	}
	return c.state(ctx, sandboxwire.Idle)
}

// report emits each model reply, with the tokens used, and each tool call,
// after the live events that showed them coming.
func (c *conversation) report(ctx context.Context, view *liveView, e llm.LoopEvent) error {
	switch e.Type {
	case llm.ModelReplied:
		id := view.end()
		view.sender.Flush()
		return c.emit(ctx, sandboxwire.AgentMessage{
			// The text as its deltas showed it: its secrets hidden the same way.
			MessageID: id, Text: c.secrets.String(e.Message.Content), ToolCalls: len(e.Message.ToolCalls),
			Usage: sandboxwire.Usage{
				InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens,
				// What the conversation holds now, against the model's window.
				ContextTokens: e.Response.Usage.InputTokens + e.Response.Usage.OutputTokens, ContextWindow: c.brain.ContextWindow,
			},
		})
	case llm.ToolStarted:
		if view.watching() {
			view.sender.Send(sandboxwire.ToolCallStarted{ToolCallID: e.Call.ID, Tool: e.Call.Name, Args: c.args(e.Call)})
		}
	case llm.ToolFinished:
		view.sender.Flush()
		return c.emit(ctx, sandboxwire.ToolCall{
			ToolCallID: e.Call.ID, Tool: e.Call.Name, Args: c.args(e.Call), IsError: e.Message.IsError, Output: sanitize.Clip(e.Message.Content, maxEventChars),
		})
	}
	return nil
}

// args are a tool call's arguments as its events show them. They are JSON,
// which the events carry as a string: a secret in them is found as JSON
// escapes it (Emit redacts the event too).
func (c *conversation) args(call llm.ToolCall) string {
	return sanitize.Clip(string(c.secrets.JSON(call.Args)), maxEventChars)
}

// liveView is a turn's live events: the model's replies, one after the
// other, as agent.message.delta events, and the tool calls as they start.
// Each reply gets a message id, which its agent.message carries too, and its
// text goes out with its secrets hidden; offsets count the code points of
// that redacted text, which is the text its agent.message shows.
type liveView struct {
	sender  *gateway.Live
	secrets *redact.Secrets
	// id, text and offset are the reply being written: its message id
	// ("" before its first piece), its redaction and the code points sent.
	id     string
	text   *redact.Stream
	offset int
	// watched says whether anyone watches (nil: always). While nobody
	// does, nothing is posted (so, a session-hour's thousand posts of
	// nobody's business are never made); sofar keeps the reply's text, and
	// behind says it was not all posted: once a viewer comes, the reply so
	// far goes out whole, from offset 0.
	watched *watchState
	sofar   strings.Builder
	behind  bool
}

// watching says whether anyone watches the agent.
func (v *liveView) watching() bool { return v.watched == nil || v.watched.watched() }

// delta sends a piece of the reply's text: all of what can go out now, the
// rest (what could begin a secret) with the next piece or at the end.
func (v *liveView) delta(_ context.Context, piece string) {
	if v.id == "" {
		v.id, v.text, v.offset, v.behind = uuid.NewString(), v.secrets.Stream(), 0, false
		v.sofar.Reset()
	}
	v.send(v.text.Next(piece))
}

// end sends what was held back of the reply, now whole, and returns its
// message id (a new one for a reply without text); the next reply is
// another message.
func (v *liveView) end() string {
	if v.id == "" {
		return uuid.NewString()
	}
	v.send(v.text.Flush())
	id := v.id
	v.id = ""
	return id
}

func (v *liveView) send(text string) {
	if text == "" {
		return
	}
	v.sofar.WriteString(text)
	switch {
	case !v.watching():
		v.behind = true
	case v.behind:
		v.sender.Send(sandboxwire.MessageDelta{MessageID: v.id, Offset: 0, Text: v.sofar.String()})
		v.behind = false
	default:
		v.sender.Send(sandboxwire.MessageDelta{MessageID: v.id, Offset: v.offset, Text: text})
	}
	v.offset += utf8.RuneCountInString(text)
}

// state reports a state change to the session and appends it to its events.
func (c *conversation) state(ctx context.Context, st sandboxwire.State) error {
	orders, err := c.cl.Report(ctx, st)
	if err != nil {
		return err
	}
	if c.watched != nil {
		c.watched.set(orders.Viewers, orders.ViewerEpoch)
	}
	return c.emit(ctx, sandboxwire.StateChanged{State: st})
}

func (c *conversation) emit(ctx context.Context, p sandboxwire.Payload) error {
	return c.cl.Emit(ctx, p)
}
