package sandboxwire

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Workspace tool requests: an app runs one of the agent's workspace tools
// (POST /api/remote_agents/{id}/workspace/tools/{tool}). The platform appends
// the request to the session's inbox (TypeWorkspaceToolRequest); the sandbox
// reads it in Orders.ToolRequests, runs the tool through its registry and
// policy, and posts the result (POST tool-results), which the platform keeps
// and shows on the events stream (TypeWorkspaceTool).
const (
	// RouteToolResults is where a sandbox posts a workspace tool's result.
	RouteToolResults = "tool-results"
	// TypeWorkspaceToolRequest is the platform's inbox event of a request.
	TypeWorkspaceToolRequest = "workspace.tool_request"
	// TypeWorkspaceTool is the platform's event of a request's result.
	TypeWorkspaceTool = "workspace.tool"
)

// Limits of workspace tool requests.
const (
	// MaxToolArgsBytes bounds a request's arguments (JSON).
	MaxToolArgsBytes = 32 * 1024
	// MaxToolOutputBytes bounds a result's output: a sandbox cuts longer
	// output to it, ending with ToolOutputTruncated.
	MaxToolOutputBytes = 64 * 1024
	// MaxToolRequestIDLen bounds a request id (printable ASCII).
	MaxToolRequestIDLen = 128
	// MaxToolResultBytes bounds POST tool-results.
	MaxToolResultBytes = MaxToolOutputBytes + MaxToolArgsBytes + 4096
)

// ToolOutputTruncated ends an output that was cut to MaxToolOutputBytes.
const ToolOutputTruncated = "\n[output truncated]"

// ToolRequest is a workspace tool request, as the inbox gives it.
type ToolRequest struct {
	Seq       int64           `json:"seq"`
	RequestID string          `json:"request_id"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
}

// WorkspaceToolRequest is the data of a TypeWorkspaceToolRequest event; Args
// is the arguments' JSON object as text (stored as it came).
type WorkspaceToolRequest struct {
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`
	Args      string `json:"args"`
}

// EventType implements Payload.
func (WorkspaceToolRequest) EventType() string { return TypeWorkspaceToolRequest }

// ToolResult is what a sandbox posts for one request (POST tool-results):
// the tool's output (secrets redacted, at most MaxToolOutputBytes) and, for
// the events stream, its arguments as the sandbox shows them (redacted,
// clipped to MaxEventTextChars).
type ToolResult struct {
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`
	Output    string `json:"output"`
	IsError   bool   `json:"is_error"`
	Args      string `json:"args,omitempty"`
}

// ToolResultResponse answers POST tool-results: Recorded is false when a
// result was recorded for the request before (the first one stands).
type ToolResultResponse struct {
	Recorded bool `json:"recorded"`
}

// WorkspaceTool is the data of a TypeWorkspaceTool event: a workspace tool an
// app ran, its arguments and output clipped to MaxEventTextChars.
type WorkspaceTool struct {
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`
	Args      string `json:"args,omitempty"`
	IsError   bool   `json:"is_error"`
	Output    string `json:"output"`
}

// EventType implements Payload.
func (WorkspaceTool) EventType() string { return TypeWorkspaceTool }

// TruncateOutput cuts s to at most MaxToolOutputBytes, on a UTF-8 boundary,
// ending with ToolOutputTruncated when it cut.
func TruncateOutput(s string) string {
	if len(s) <= MaxToolOutputBytes {
		return s
	}
	cut := MaxToolOutputBytes - len(ToolOutputTruncated)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ToolOutputTruncated
}

// CheckToolResult checks a result a sandbox posts against the limits.
func CheckToolResult(r ToolResult) error {
	switch {
	case r.RequestID == "" || len(r.RequestID) > MaxToolRequestIDLen:
		return fmt.Errorf("request_id must be 1 to %d characters", MaxToolRequestIDLen)
	case len(r.Output) > MaxToolOutputBytes || !utf8.ValidString(r.Output):
		return fmt.Errorf("output must be at most %d bytes of UTF-8", MaxToolOutputBytes)
	case len(r.Args) > MaxEventTextChars*4 || !utf8.ValidString(r.Args):
		return fmt.Errorf("args must be at most %d characters of UTF-8", MaxEventTextChars)
	}
	return nil
}
