package session

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// Transitioner moves sessions through their states (Store's Transition).
type Transitioner interface {
	Transition(ctx context.Context, id string, c Change) (Session, error)
}

// StartResume moves paused sess to resuming (the next launch generation,
// from its last checkpoint or the one named, checkpointID) and queues its
// sandbox's start; its paused time is banked. A start that cannot be
// queued puts it back to paused: 503, for a retry. ErrConflict when sess
// moved meanwhile.
func StartResume(ctx context.Context, st Transitioner, jobs Publisher, log *slog.Logger, sess Session, checkpointID string, now time.Time) (Session, error) {
	pausedFor := sess.PausedFor
	if !sess.PausedAt.IsZero() && now.After(sess.PausedAt) {
		pausedFor += now.Sub(sess.PausedAt)
	}
	after, err := st.Transition(ctx, sess.ID, Change{From: []State{Paused}, To: Resuming, Generation: sess.Generation,
		Set: Fields{PausedFor: max(pausedFor, time.Millisecond), CheckpointID: checkpointID}})
	if err != nil {
		return Session{}, err
	}
	if err := jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.SessionStart, SessionID: sess.ID, Generation: after.Generation}, 0); err != nil {
		log.WarnContext(ctx, "publish session.start for a resume", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
		if _, terr := st.Transition(context.WithoutCancel(ctx), sess.ID, Change{From: []State{Resuming}, To: Paused,
			Generation: after.Generation, Set: Fields{PausedAt: now}}); terr != nil && !errors.Is(terr, ErrConflict) {
			log.WarnContext(ctx, "put a resume that could not start back to paused", slog.String("session_id", sess.ID), slog.String("error", terr.Error()))
		}
		return Session{}, apierror.Unavailable(err)
	}
	return after, nil
}

// PausesWhenIdle reports whether sess's agent type pauses its agents at
// their idle limit rather than ending them.
func PausesWhenIdle(sess Session) bool {
	return sess.Workspace != nil && sess.Workspace.OnIdle == registry.OnIdlePause && sess.JobID == ""
}

// ResumesOnMessage reports whether a message sent to paused sess resumes it.
func ResumesOnMessage(sess Session) bool {
	return sess.Workspace != nil && sess.Workspace.ResumeOnMessage && sess.JobID == ""
}
