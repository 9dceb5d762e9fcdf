package sandboxchannel

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// checkpoints is the service the checkpoint routes use: an error where the
// channel keeps none (no bucket).
func (c *Service) checkpoints(sess session.Session) (*checkpoint.Service, error) {
	if c.o.Checkpoints == nil {
		return nil, apierror.New(apierror.NotFound, "This platform keeps no checkpoints.")
	}
	if sess.JobID != "" {
		return nil, apierror.New(apierror.Forbidden, "A job's sandbox makes no checkpoints.")
	}
	return c.o.Checkpoints, nil
}

// CheckpointUploads presigns the uploads of the chunks of a checkpoint of
// sess's sandbox (see Authenticate).
func (c *Service) CheckpointUploads(ctx context.Context, sess session.Session, in sandboxwire.CheckpointUploadsRequest) (sandboxwire.CheckpointUploadsResponse, error) {
	cps, err := c.checkpoints(sess)
	if err != nil {
		return sandboxwire.CheckpointUploadsResponse{}, err
	}
	ups, err := cps.Uploads(ctx, sess.ID, in.Chunks)
	return sandboxwire.CheckpointUploadsResponse{Uploads: ups}, err
}

// CheckpointDownloads presigns the downloads of chunks of sess's
// checkpoints, for its sandbox to restore one.
func (c *Service) CheckpointDownloads(ctx context.Context, sess session.Session, in sandboxwire.CheckpointDownloadsRequest) (sandboxwire.CheckpointDownloadsResponse, error) {
	cps, err := c.checkpoints(sess)
	if err != nil {
		return sandboxwire.CheckpointDownloadsResponse{}, err
	}
	downs, err := cps.Downloads(ctx, sess.ID, in.Hashes)
	return sandboxwire.CheckpointDownloadsResponse{Downloads: downs}, err
}

// CommitCheckpoint commits the checkpoint sess's sandbox uploaded, once
// every chunk is verified, and makes it the session's last. The checkpoint
// of a pause pauses the session: its sandbox is told to stop (its orders),
// and stopped after StopGrace in any case.
func (c *Service) CommitCheckpoint(ctx context.Context, sess session.Session, in sandboxwire.CheckpointCommit) (sandboxwire.Checkpoint, error) {
	cps, err := c.checkpoints(sess)
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	if !slices.Contains(session.Running, sess.State) && sess.State != session.Pausing {
		return sandboxwire.Checkpoint{}, apierror.New(apierror.AgentNotAlive, "The session is %s: its sandbox makes no checkpoint now.", sess.State)
	}
	cp, err := cps.Commit(ctx, sess.ID, sess.Generation, sess.CheckpointID, in.Manifest, in.Reason)
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	now := c.o.Now()
	c.prune(ctx, cps, sess, cp, now)
	pauses := sess.State == session.Pausing && in.Reason == sandboxwire.CheckpointPause
	// A sandbox interrupted by a signal its session did not order pauses
	// it on the checkpoint it wrote on its way out.
	interrupted := slices.Contains(session.Running, sess.State) && in.Reason == sandboxwire.CheckpointShutdown
	if pauses || interrupted {
		change := session.Change{From: []session.State{session.Pausing}, To: session.Paused, Generation: sess.Generation,
			Set: session.Fields{CheckpointID: cp.ID, PausedAt: now}}
		if interrupted {
			change.From, change.Reason = session.Running, sandboxwire.ReasonShutdown
		}
		_, err = c.o.Store.Transition(ctx, sess.ID, change)
		if err == nil && c.o.Jobs != nil {
			m := jobqueue.Message{Type: jobqueue.SessionStop, SessionID: sess.ID, Generation: sess.Generation}
			if perr := c.o.Jobs.Publish(ctx, m, session.StopGrace); perr != nil {
				// Its orders tell it to stop; should it not, the sandbox of a
				// paused session stops at its next heartbeat's orders.
				c.o.Log.WarnContext(ctx, "publish the stop of a paused session's sandbox", slog.String("session_id", sess.ID), slog.String("error", perr.Error()))
			}
		}
	} else {
		_, err = c.o.Store.Touch(ctx, sess.ID, sess.Generation, session.Fields{CheckpointID: cp.ID})
	}
	if errors.Is(err, session.ErrConflict) {
		// The session moved meanwhile (a kill, a shutdown): the checkpoint
		// is kept, but is not the session's.
		return cp, apierror.New(apierror.AgentNotAlive, "The session moved on while the checkpoint was committed.")
	}
	return cp, err
}

// prune deletes sess's checkpoints its type keeps no longer, now that cp is
// its last (Service.Prune); a prune that fails is tried again at the next
// commit.
func (c *Service) prune(ctx context.Context, cps *checkpoint.Service, sess session.Session, cp sandboxwire.Checkpoint, now time.Time) {
	var ws registry.WorkspaceConfig
	if sess.Workspace != nil {
		ws = *sess.Workspace
	}
	n, err := cps.Prune(ctx, sess.ID, cp.ID, now.Add(-ws.CheckpointRetention()))
	switch {
	case err != nil:
		c.o.Log.WarnContext(ctx, "prune checkpoints", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	case n > 0:
		c.o.Log.InfoContext(ctx, "checkpoints pruned", slog.String("session_id", sess.ID), slog.Int("pruned", n))
	}
}
