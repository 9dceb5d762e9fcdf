package sandboxwire

import "fmt"

// Live events: what an agent is doing right now, pushed to the agent's
// viewers as it happens and never stored one by one. A reply streams as
// agent.message.delta pieces, then is stored once, whole, as the
// agent.message of the same MessageID; a tool call is shown as it starts
// (tool.call.started), then stored with its result (tool.call, of the same
// ToolCallID). A sandbox posts them in order (POST RouteDeltas), one post
// at a time; the platform keeps only the text so far of the message being
// written, for a viewer that joins in the middle of it.
const (
	RouteDeltas           = "deltas"
	TypeAgentMessageDelta = "agent.message.delta"
	TypeToolCallStarted   = "tool.call.started"
)

// Bounds of one POST deltas.
const (
	// MaxDeltasPerPost bounds the live events of one post.
	MaxDeltasPerPost = 64
	// MaxDeltaBytes bounds one live event's data as JSON.
	MaxDeltaBytes = 16 * 1024
)

// LiveTypes are the live event types.
var LiveTypes = []string{TypeAgentMessageDelta, TypeToolCallStarted}

// MessageDelta is a piece of the reply MessageID: Text follows the first
// Offset characters (Unicode code points) of the message.
type MessageDelta struct {
	MessageID string `json:"message_id"`
	Offset    int    `json:"offset"`
	Text      string `json:"text"`
}

// EventType implements Payload.
func (MessageDelta) EventType() string { return TypeAgentMessageDelta }

// ToolCallStarted is a tool call that began: the model's id of the call,
// the tool, and its arguments as JSON (secrets hidden, cut at
// MaxEventTextChars), as its tool.call will show them.
type ToolCallStarted struct {
	ToolCallID string `json:"tool_call_id"`
	Tool       string `json:"tool"`
	Args       string `json:"args"`
}

// EventType implements Payload.
func (ToolCallStarted) EventType() string { return TypeToolCallStarted }

// DeltasRequest is what a sandbox posts to RouteDeltas: 1 to
// MaxDeltasPerPost live events, in the order they happened.
type DeltasRequest struct {
	Deltas []Event `json:"deltas"`
}

// Validate checks a DeltasRequest's bounds and types.
func (r DeltasRequest) Validate() error {
	if n := len(r.Deltas); n == 0 || n > MaxDeltasPerPost {
		return fmt.Errorf("deltas must hold 1 to %d live events, not %d", MaxDeltasPerPost, n)
	}
	for i, d := range r.Deltas {
		if d.Type != TypeAgentMessageDelta && d.Type != TypeToolCallStarted {
			return fmt.Errorf("deltas[%d]: %q is not a live event type", i, d.Type)
		}
		if len(d.Data) > MaxDeltaBytes {
			return fmt.Errorf("deltas[%d]: data over %d bytes", i, MaxDeltaBytes)
		}
	}
	return nil
}
