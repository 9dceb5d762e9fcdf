package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/sanitize"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Workspace tool requests: an app runs one of its agent's workspace tools
// (RunWorkspaceTool). The request is appended to the session's inbox once
// per request id, like a message with a client_message_id; the sandbox runs
// it and posts the result (Channel.ToolResult), kept as a ToolResultRecord;
// the app's request waits for that record up to ToolWait and otherwise
// answers pending, to be asked again with the same request id.

// Bounds of workspace tool requests.
const (
	// ToolWait bounds how long a request waits for its result: under API
	// Gateway's 29 s, with room to answer.
	ToolWait = 25 * time.Second
	// ToolRetention is how long a request id and its result are kept: a
	// retry within it gets the same result, never a second run.
	ToolRetention = 24 * time.Hour
	// MaxToolBodyBytes bounds the body of a workspace tool request.
	MaxToolBodyBytes = sandboxwire.MaxToolArgsBytes + 1024
)

// ToolResultRecord is the durable result of one workspace tool request.
type ToolResultRecord struct {
	Key       string    `json:"key"`
	SessionID string    `json:"session_id"`
	RequestID string    `json:"request_id"`
	Tool      string    `json:"tool"`
	Output    string    `json:"output"`
	IsError   bool      `json:"is_error"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt (epoch seconds) is when TTL removes the record.
	ExpiresAt int64 `json:"expires_at"`
}

// ToolResults keeps the results of workspace tool requests
// (dynamo.ToolResults, in the idempotency table).
type ToolResults interface {
	// Record stores r unless a result has its key; it reports whether it
	// stored it (the first result of a request stands).
	Record(ctx context.Context, r ToolResultRecord) (bool, error)
	// Result reads the result with key; ErrNotFound if there is none.
	Result(ctx context.Context, key string) (ToolResultRecord, error)
}

// WorkspaceToolRequest is the body of POST
// /api/remote_agents/{id}/workspace/tools/{tool}: the tool's arguments, an
// object (absent: none).
type WorkspaceToolRequest struct {
	Args json.RawMessage `json:"args,omitempty"`
}

// WorkspaceToolResult is a workspace tool's answer.
type WorkspaceToolResult struct {
	RequestID string `json:"request_id"`
	Tool      string `json:"tool"`
	Output    string `json:"output"`
	IsError   bool   `json:"is_error"`
	// Replayed: the result of an earlier request with this request id.
	Replayed bool `json:"-"`
}

// WorkspaceToolPending says the request is queued or running: ask again
// with the same request id (Idempotency-Key) for its result.
type WorkspaceToolPending struct {
	Status            string `json:"status"`
	RequestID         string `json:"request_id"`
	RetryAfterSeconds int    `json:"retry_after_seconds"`
}

// WorkspaceToolOutcome is a result, or Pending.
type WorkspaceToolOutcome struct {
	Result  *WorkspaceToolResult
	Pending *WorkspaceToolPending
}

// WorkspaceToolRequestKey is the idempotency table key of request id
// requestID of session id.
func WorkspaceToolRequestKey(id, requestID string) string { return ScopedKey("wstool", id, requestID) }

// WorkspaceToolResultKey is the idempotency table key of the result of
// request requestID of session id.
func WorkspaceToolResultKey(id, requestID string) string {
	return ScopedKey("wstool-result", id, requestID)
}

// CheckWorkspaceTool refuses, before anything is read or queued, a tool that
// sess cannot run: 404 workspace_disabled when its agent type has no
// workspace, 404 tool_not_found for a name that is no workspace tool, 403
// tool_not_enabled for a tool its type does not enable (the configuration
// stored on the session at create), 409 agent_not_alive once it ends.
func CheckWorkspaceTool(sess Session, tool string) error {
	if sess.Workspace != nil && !sess.Workspace.Enabled {
		return apierror.New(apierror.WorkspaceDisabled, "The agent's type has no workspace, so it has no workspace tools.")
	}
	if !toolspec.IsWorkspaceTool(tool) {
		e := apierror.New(apierror.ToolNotFound, "No workspace tool is called %q; the workspace tools are %s.", sanitize.Clip(tool, 100), strings.Join(toolspec.WorkspaceTools(), ", "))
		e.Details = map[string]any{"valid_tools": toolspec.WorkspaceTools()}
		return e
	}
	if sess.Workspace != nil && !slices.Contains(sess.Workspace.Tools, tool) {
		e := apierror.New(apierror.ToolNotEnabled, "Tool '%s' is not enabled for this agent type", tool)
		e.Details = map[string]any{"enabled_tools": append([]string{}, sess.Workspace.Tools...)}
		return e
	}
	if sess.State == Ending || sess.State.Terminal() {
		return apierror.New(apierror.AgentNotAlive, "The agent is %s and runs no more tools.", sess.State)
	}
	return nil
}

// WorkspaceToolsOptions configure a WorkspaceTools.
type WorkspaceToolsOptions struct {
	Store Store
	// ToolResults keeps the results the sandboxes send back.
	ToolResults ToolResults
	// Notifier, if set, wakes the session's sandbox at once for a request
	// (see Pushing).
	Notifier Notifier
	Log      *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// WorkspaceTools runs workspace tools in a session's sandbox for its token
// holder.
type WorkspaceTools struct {
	Access
	o WorkspaceToolsOptions
}

// NewWorkspaceTools returns workspace tools with options o.
func NewWorkspaceTools(o WorkspaceToolsOptions) *WorkspaceTools {
	o.Now, o.Log = clock(o.Now), logger(o.Log)
	o.Store = Pushing(o.Store, o.Notifier, o.Log)
	return &WorkspaceTools{Access: Access{Store: o.Store, Now: o.Now}, o: o}
}

// RunWorkspaceTool queues tool with req's arguments to the sandbox of sess
// (see Authorize), once per requestID ("" for a new one), and waits up to
// ToolWait for the result. A request id used before answers that request's
// result (Replayed), or pending while it runs; with another tool or other
// arguments it is idempotency_key_reused.
func (s *WorkspaceTools) RunWorkspaceTool(ctx context.Context, sess Session, tool, requestID string, req WorkspaceToolRequest) (WorkspaceToolOutcome, error) {
	if err := CheckWorkspaceTool(sess, tool); err != nil {
		return WorkspaceToolOutcome{}, err
	}
	args, err := toolArgs(req.Args)
	if err != nil {
		return WorkspaceToolOutcome{}, err
	}
	if requestID == "" {
		requestID = newID()
	} else if len(requestID) > sandboxwire.MaxToolRequestIDLen || !Printable.MatchString(requestID) {
		return WorkspaceToolOutcome{}, apierror.New(apierror.InvalidRequest, "Idempotency-Key must be 1 to %d printable ASCII characters.", sandboxwire.MaxToolRequestIDLen)
	}
	ev, err := NewEvent(sandboxwire.WorkspaceToolRequest{RequestID: requestID, Tool: tool, Args: args})
	if err != nil {
		return WorkspaceToolOutcome{}, err
	}
	now := s.o.Now().UTC()
	rec := IdempotencyRecord{
		Key:         WorkspaceToolRequestKey(sess.ID, requestID),
		SessionID:   sess.ID,
		RequestHash: HashOf(struct{ Tool, Args string }{tool, args}),
		CreatedAt:   now,
		ExpiresAt:   now.Add(ToolRetention).Unix(),
	}
	got, replayed, err := AppendOnce(ctx, s.o.Store, sess.ID, sess.Generation, []Event{ev}, rec)
	switch {
	case err != nil:
		return WorkspaceToolOutcome{}, notAlive(err)
	case replayed && got.RequestHash != rec.RequestHash:
		return WorkspaceToolOutcome{}, apierror.New(apierror.IdempotencyKeyReused, "This Idempotency-Key was used for another workspace tool request.")
	}
	if !replayed {
		s.o.Log.InfoContext(ctx, "workspace tool queued", slog.String("session_id", sess.ID), slog.String("tool", tool), slog.Int64("seq", got.Seq))
	}
	return s.waitToolResult(ctx, sess.ID, tool, requestID, replayed)
}

// toolArgs checks a request's arguments, a JSON object of at most
// MaxToolArgsBytes, and returns them compact ("{}" when absent).
func toolArgs(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	var buf bytes.Buffer
	if raw[0] != '{' || json.Compact(&buf, raw) != nil {
		return "", apierror.New(apierror.InvalidRequest, "args must be a JSON object of the tool's arguments.")
	}
	if buf.Len() > sandboxwire.MaxToolArgsBytes {
		return "", apierror.New(apierror.InvalidRequest, "args must be at most %d bytes of JSON.", sandboxwire.MaxToolArgsBytes)
	}
	return buf.String(), nil
}

// waitToolResult polls the request's result until it is there, the session
// ends (agent_not_alive), or ToolWait (or the context's deadline, less a
// margin) passes: then pending.
func (s *WorkspaceTools) waitToolResult(ctx context.Context, id, tool, requestID string, replayed bool) (WorkspaceToolOutcome, error) {
	answerBy := s.o.Now().Add(ToolWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(answerBy) {
		answerBy = d.Add(-time.Second)
	}
	delay := 10 * time.Millisecond
	for polls := 0; ; polls++ {
		res, err := s.o.ToolResults.Result(ctx, WorkspaceToolResultKey(id, requestID))
		switch {
		case err == nil:
			return WorkspaceToolOutcome{Result: &WorkspaceToolResult{RequestID: requestID, Tool: res.Tool, Output: res.Output, IsError: res.IsError, Replayed: replayed}}, nil
		case !errors.Is(err, ErrNotFound):
			return WorkspaceToolOutcome{}, fmt.Errorf("read workspace tool result: %w", err)
		}
		if polls%10 == 9 { // now and then: has the agent ended meanwhile?
			if sess, err := s.o.Store.Get(ctx, id); err == nil && (sess.State == Ending || sess.State.Terminal()) {
				return WorkspaceToolOutcome{}, apierror.New(apierror.AgentNotAlive, "The agent ended before it ran the tool.")
			}
		}
		if !s.o.Now().Before(answerBy) {
			return WorkspaceToolOutcome{Pending: &WorkspaceToolPending{Status: "pending", RequestID: requestID, RetryAfterSeconds: 1}}, nil
		}
		select {
		case <-ctx.Done():
			return WorkspaceToolOutcome{}, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}
