// Package llm is the agent's view of a language model: one Provider interface
// (Chat, Stream) over messages and tool definitions, whatever the vendor behind it.
// Adapters use each vendor's native SDK; Scripted replays a script for tests and
// offline runs. Loop is the one agent loop over a model and its tools: model call,
// tool calls, results back to the model, repeat.
package llm

import (
	"context"
	"encoding/json"
)

// Role says who wrote a message.
type Role string

// The roles.
const (
	User      Role = "user"
	Assistant Role = "assistant"
	ToolRole  Role = "tool"
)

// Message is one turn of a conversation. The system prompt travels in Request.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are what an assistant message asked to run.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID ties a tool message to the call it answers; IsError marks a failure.
	ToolCallID string `json:"tool_call_id,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	// Signature is opaque data the provider attached to the call and wants back
	// with it when the conversation is sent again (Gemini's thought signature,
	// without which Gemini 3 refuses the history); other providers leave it
	// empty and ignore it.
	Signature []byte `json:"signature,omitempty"`
}

// Tool is a tool definition as the model sees it: its arguments' JSON Schema.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"input_schema"`
}

// Request is one model call.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Response is a model's reply.
type Response struct {
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	Usage      Usage      `json:"usage"`
	StopReason string     `json:"stop_reason,omitempty"`
	Model      string     `json:"model,omitempty"`
}

// EventType names a streaming event.
type EventType string

// Streaming events: text deltas, complete tool calls, then one done (with the whole
// response) or one error.
const (
	TextDelta    EventType = "text"
	ToolCallDone EventType = "tool_call"
	Done         EventType = "done"
	Failed       EventType = "error"
)

// Event is one streaming event.
type Event struct {
	Type     EventType
	Text     string
	ToolCall *ToolCall
	Response *Response
	Err      error
}

// Provider is a language model.
type Provider interface {
	// Name is the provider's name, as configured ("anthropic", "scripted", …).
	Name() string
	// Chat sends req and returns the whole reply.
	Chat(ctx context.Context, req Request) (Response, error)
	// Stream sends req and delivers the reply as events on the channel, which is
	// closed after the Done or Failed event.
	Stream(ctx context.Context, req Request) (<-chan Event, error)
}
