package sandboxchannel

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/sanitize"
	"github.com/remote-agents/remote-agents/shared/session"
)

// workspaceToolRequest turns an inbox event into the request the sandbox
// runs; ok is false for one that has a result already (run before, by this
// sandbox or an earlier launch) or is damaged.
func (c *Service) workspaceToolRequest(ctx context.Context, sessionID string, e session.Event) (sandboxwire.ToolRequest, bool, error) {
	var in sandboxwire.WorkspaceToolRequest
	if err := sandboxwire.Decode(e.Data, &in); err != nil || in.RequestID == "" || !json.Valid([]byte(in.Args)) {
		c.o.Log.WarnContext(ctx, "damaged workspace tool request", slog.String("session_id", sessionID), slog.Int64("seq", e.Seq))
		return sandboxwire.ToolRequest{}, false, nil
	}
	if c.o.ToolResults != nil {
		_, err := c.o.ToolResults.Result(ctx, session.WorkspaceToolResultKey(sessionID, in.RequestID))
		switch {
		case err == nil:
			return sandboxwire.ToolRequest{}, false, nil
		case !errors.Is(err, session.ErrNotFound):
			return sandboxwire.ToolRequest{}, false, err
		}
	}
	return sandboxwire.ToolRequest{Seq: e.Seq, RequestID: in.RequestID, Tool: in.Tool, Args: json.RawMessage(in.Args)}, true, nil
}

// ToolResult records the result the sandbox of sess (see Authenticate) posts
// for a workspace tool request of its session, once: the first result of a
// request stands. The first is shown on the events stream
// (sandboxwire.WorkspaceTool), its arguments and output clipped.
func (c *Service) ToolResult(ctx context.Context, sess session.Session, in sandboxwire.ToolResult) (sandboxwire.ToolResultResponse, error) {
	if err := sandboxwire.CheckToolResult(in); err != nil {
		return sandboxwire.ToolResultResponse{}, apierror.New(apierror.InvalidRequest, "%s.", err.Error())
	}
	rec, err := c.o.Store.Idempotency(ctx, session.WorkspaceToolRequestKey(sess.ID, in.RequestID))
	if errors.Is(err, session.ErrNotFound) || (err == nil && rec.SessionID != sess.ID) {
		return sandboxwire.ToolResultResponse{}, apierror.New(apierror.InvalidRequest, "No workspace tool request of this session has that request_id.")
	}
	if err != nil {
		return sandboxwire.ToolResultResponse{}, err
	}
	evs, err := c.o.Store.Events(ctx, sess.ID, rec.Seq-1, 1)
	if err != nil {
		return sandboxwire.ToolResultResponse{}, err
	}
	var req sandboxwire.WorkspaceToolRequest
	if len(evs) != 1 || evs[0].Type != sandboxwire.TypeWorkspaceToolRequest || sandboxwire.Decode(evs[0].Data, &req) != nil || req.Tool != in.Tool {
		return sandboxwire.ToolResultResponse{}, apierror.New(apierror.InvalidRequest, "The request %s is not one for %s.", sanitize.Clip(in.RequestID, 100), sanitize.Clip(in.Tool, 100))
	}
	now := c.o.Now().UTC()
	created, err := c.o.ToolResults.Record(ctx, session.ToolResultRecord{
		Key: session.WorkspaceToolResultKey(sess.ID, in.RequestID), SessionID: sess.ID, RequestID: in.RequestID, Tool: in.Tool,
		Output: in.Output, IsError: in.IsError, CreatedAt: now, ExpiresAt: now.Add(session.ToolRetention).Unix(),
	})
	if err != nil || !created {
		return sandboxwire.ToolResultResponse{Recorded: created}, err
	}
	ev, err := session.NewEvent(sandboxwire.WorkspaceTool{RequestID: in.RequestID, Tool: in.Tool, IsError: in.IsError,
		Args: sanitize.Clip(in.Args, sandboxwire.MaxEventTextChars), Output: sanitize.Clip(in.Output, sandboxwire.MaxEventTextChars)})
	if err != nil {
		return sandboxwire.ToolResultResponse{}, err
	}
	if _, err := c.o.Store.AppendEvents(ctx, sess.ID, sess.Generation, []session.Event{ev}); err != nil && !errors.Is(err, session.ErrConflict) {
		// The result is kept: the app gets it; only the stream misses it.
		c.o.Log.WarnContext(ctx, "append workspace tool event", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	}
	return sandboxwire.ToolResultResponse{Recorded: true}, nil
}
