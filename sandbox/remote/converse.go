package remote

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"path/filepath"

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
	loop := llm.Loop{Provider: c.brain.Provider, Model: c.brain.Model, System: c.system, MaxTokens: c.brain.MaxTokens,
		Tools: c.brain.Tools, MaxTurns: maxTurnCalls, TokenLimit: c.brain.TokenLimit, OnEvent: c.report}
	conv := llm.Conversation{Messages: c.msgs, Usage: c.used}
	_, err := loop.Run(ctx, &conv)
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

// report emits each model reply, with the tokens used, and each tool call.
func (c *conversation) report(ctx context.Context, e llm.LoopEvent) error {
	switch e.Type {
	case llm.ModelReplied:
		return c.emit(ctx, sandboxwire.AgentMessage{
			Text: e.Message.Content, ToolCalls: len(e.Message.ToolCalls),
			Usage: sandboxwire.Usage{
				InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens,
				// What the conversation holds now, against the model's window.
				ContextTokens: e.Response.Usage.InputTokens + e.Response.Usage.OutputTokens, ContextWindow: c.brain.ContextWindow,
			},
		})
	case llm.ToolFinished:
		// The arguments are JSON, which the event carries as a string: a secret
		// in them is found as JSON escapes it (Emit redacts the event too).
		args := c.secrets.JSON(e.Call.Args)
		return c.emit(ctx, sandboxwire.ToolCall{
			ToolCallID: e.Call.ID, Tool: e.Call.Name, Args: sanitize.Clip(string(args), maxEventChars), IsError: e.Message.IsError, Output: sanitize.Clip(e.Message.Content, maxEventChars),
		})
	}
	return nil
}

// state reports a state change to the session and appends it to its events.
func (c *conversation) state(ctx context.Context, st sandboxwire.State) error {
	if err := c.cl.Status(ctx, st, "", ""); err != nil {
		return err
	}
	return c.emit(ctx, sandboxwire.StateChanged{State: st})
}

func (c *conversation) emit(ctx context.Context, p sandboxwire.Payload) error {
	return c.cl.Emit(ctx, p)
}
