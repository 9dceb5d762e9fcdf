package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/checkpoint"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// agentState is what a checkpoint keeps of the agent besides its
// workspace: its conversation as the model sees it, what it used, the
// inbox cursor, and the user messages waiting for its next turn.
type agentState struct {
	// SessionID is the agent whose sandbox wrote it: a fork's inbox is its
	// own, read from its start.
	SessionID string        `json:"session_id"`
	System    string        `json:"system"`
	Messages  []llm.Message `json:"messages"`
	Used      llm.Usage     `json:"used"`
	After     int64         `json:"after"`
	Pending   []string      `json:"pending,omitempty"`
}

// checkpointer is the run's checkpoint writer (its workspace, its channel).
func (r *run) checkpointer() *checkpoint.Writer {
	if r.ckpt == nil {
		r.ckpt = &checkpoint.Writer{Channel: r.cl, Dir: r.c.Workspace}
	}
	return r.ckpt
}

// checkpoint writes and commits a checkpoint of the workspace and the
// agent's state, for reason. One written during a turn keeps the workspace
// as it is and the conversation as the turn found it, with the turn's
// input waiting again: a resume from it does the turn again.
func (r *run) checkpoint(ctx context.Context, reason string) (sandboxwire.Checkpoint, error) {
	st := agentState{SessionID: r.c.SessionID, After: r.after, Pending: r.pending}
	switch {
	case r.conv != nil && r.turning:
		st.System, st.Messages, st.Used = r.conv.system, r.turnBase, r.turnUsed
		st.Pending = append([]string{r.turnInput}, r.pending...)
	case r.conv != nil:
		st.System, st.Messages, st.Used = r.conv.system, r.conv.msgs, r.conv.used
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	return r.checkpointer().Write(ctx, raw, reason)
}

// pause answers a pause: the turn in progress is stopped, then the
// checkpoint written and committed, which pauses the session; the sandbox
// then stops (done). A checkpoint that fails is said to the platform, which
// keeps the agent running, and a new turn context is returned for it.
func (r *run) pause(ctx context.Context, stopTurn context.CancelFunc) (done bool, turnCtx context.Context, stop context.CancelFunc) {
	r.finishTurn(stopTurn)
	cp, err := r.checkpoint(ctx, sandboxwire.CheckpointPause)
	if err == nil {
		r.log.Info("sandbox paused: checkpoint committed", slog.String("checkpoint", cp.ID), slog.Int("files", cp.Files),
			slog.Int64("bytes", cp.Bytes), slog.Int64("new_bytes", cp.NewBytes))
		return true, nil, nil
	}
	if ctx.Err() != nil {
		return false, ctx, func() {} // stopping: the platform keeps the last checkpoint
	}
	r.log.Error("pause: the checkpoint failed; the agent goes on", slog.String("error", err.Error()))
	if ferr := r.cl.Status(ctx, sandboxwire.Idle, "", sandboxwire.ReasonCheckpointFailed); ferr != nil {
		r.log.Warn("pause: report the failed checkpoint", slog.String("error", ferr.Error()))
	}
	turnCtx, stop = context.WithCancel(ctx)
	return false, turnCtx, stop
}

// periodicCheckpoint writes a checkpoint if anything happened since the
// last, or a turn is in progress (however long it runs): a sandbox lost
// later loses only what came after. One that fails (a file changed while
// it was read) is tried again at the next tick.
func (r *run) periodicCheckpoint(ctx context.Context) {
	if (!r.changed && !r.turning) || r.conv == nil || r.tools.running() {
		return // nothing new; or an app's tool is at work: the next tick
	}
	cp, err := r.checkpoint(ctx, sandboxwire.CheckpointPeriodic)
	if err != nil {
		r.log.Warn("periodic checkpoint", slog.String("error", err.Error()))
		return
	}
	r.changed = false
	r.log.Info("checkpoint committed", slog.String("checkpoint", cp.ID), slog.Int64("new_bytes", cp.NewBytes))
}

// InterruptCheckpointTimeout bounds the checkpoint of a sandbox stopped by
// a signal the platform did not order, within the 30 s a Fargate task is
// given between SIGTERM and SIGKILL.
const InterruptCheckpointTimeout = 25 * time.Second

// interrupted writes the checkpoint of a sandbox stopped by a signal that
// its session did not order (a Fargate task interrupted, a host drained),
// which pauses the session on it. It reports whether the sandbox is to
// stop without reporting its end: where checkpoints are kept and the
// session is not stopping anyway, so that the session is paused on this
// checkpoint or, when it could not be written in time, on its last (the
// sandbox's exit says it was lost), and never ended with its work.
func (r *run) interrupted(ctx context.Context) bool {
	if r.every <= 0 || r.conv == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, InterruptCheckpointTimeout)
	defer cancel()
	var orders sandboxwire.Orders
	if err := r.cl.Do(ctx, http.MethodPost, sandboxwire.RouteHeartbeat, sandboxwire.HeartbeatReport{}, &orders); err != nil {
		r.log.Warn("interrupted: the platform cannot be reached; the session is left on its last checkpoint", slog.String("error", err.Error()))
		return true
	}
	if orders.Stop || orders.State.Terminal() {
		return false // ordered to stop: the session is ending
	}
	cp, err := r.checkpoint(ctx, sandboxwire.CheckpointShutdown)
	if err != nil {
		r.log.Warn("interrupted: no checkpoint; the session is left on its last", slog.String("error", err.Error()))
		return true
	}
	r.log.Info("sandbox interrupted: paused on its checkpoint", slog.String("checkpoint", cp.ID), slog.Int64("new_bytes", cp.NewBytes))
	return true
}

// resume restores the checkpoint the spec names into the workspace, and the
// agent's state with it. A pool sandbox's workspace, which holds what its
// type prepared, is emptied first: it becomes the checkpoint's alone.
func (r *run) resume(ctx context.Context, cp sandboxwire.Checkpoint) (agentState, error) {
	if r.prepared != nil {
		if err := emptyDir(r.c.Workspace); err != nil {
			return agentState{}, fmt.Errorf("resume from %s: empty the prepared workspace: %w", cp.ID, err)
		}
	}
	raw, m, err := checkpoint.Restore(ctx, r.cl, nil, r.c.Workspace, cp.Manifest)
	if err != nil {
		return agentState{}, fmt.Errorf("resume from %s: %w", cp.ID, err)
	}
	r.checkpointer().Know(m)
	var st agentState
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &st); err != nil {
			return agentState{}, fmt.Errorf("resume from %s: the agent's state: %w", cp.ID, err)
		}
	}
	if st.SessionID != r.c.SessionID {
		st.After = 0 // a fork: another agent's inbox cursor
	}
	// The workspace is the tools' user's, as it was.
	if err := r.c.ToolUser.OwnTree(r.c.Workspace); err != nil {
		return agentState{}, err
	}
	r.log.Info("sandbox resumed from its checkpoint", slog.String("checkpoint", cp.ID), slog.Int("files", cp.Files), slog.Int64("bytes", cp.Bytes))
	return st, nil
}

// emptyDir removes everything dir holds, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
