package fleet

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// PauseStatus answers a pause or a resume: where the agent is now, and the
// checkpoint it is paused on (or went on from).
type PauseStatus struct {
	AgentID string        `json:"agent_id"`
	Alive   bool          `json:"alive"`
	State   session.State `json:"state"`
	// Status is State in the workspace spec's words (session.StatusOf).
	Status string         `json:"status"`
	Reason session.Reason `json:"reason,omitempty"`
	// Checkpoint is the agent's last committed checkpoint (nil: none).
	Checkpoint *sandboxwire.Checkpoint `json:"checkpoint"`
}

// CheckpointList is a page of an agent's checkpoints, oldest first.
type CheckpointList struct {
	AgentID     string                   `json:"agent_id"`
	Checkpoints []sandboxwire.Checkpoint `json:"checkpoints"`
	// NextCursor, when set, reads the next page (cursor=…).
	NextCursor string `json:"next_cursor,omitempty"`
}

// pauseRetries bounds how often a pause or resume looks again at an agent
// that moved while it acted.
const pauseRetries = 3

// Pause pauses a running agent (its app key or one of its session tokens):
// its sandbox stops its turn, writes a checkpoint of its workspace and of
// the agent's state, and stops once the platform verified it. It answers
// once the agent is paused, or when Wait passed (state pausing: ask alive,
// or pause again, to know). A checkpoint that fails leaves the agent
// running and is 503 service_unavailable: nothing was paused.
func (s *Service) Pause(ctx context.Context, id, bearer string) (PauseStatus, error) {
	for range pauseRetries {
		sess, err := s.killAuthorize(ctx, id, bearer)
		if err != nil {
			return PauseStatus{}, err
		}
		switch {
		case sess.State == session.Paused || sess.State == session.Pausing:
		case slices.Contains(session.Running, sess.State):
			if s.o.Checkpoints == nil {
				return PauseStatus{}, apierror.New(apierror.NotFound, "This platform keeps no checkpoints: its agents cannot pause.")
			}
			_, err := s.o.Store.Transition(ctx, id, session.Change{From: session.Running, To: session.Pausing, Generation: sess.Generation})
			if errors.Is(err, session.ErrConflict) {
				continue
			}
			if err != nil {
				return PauseStatus{}, err
			}
		default:
			return PauseStatus{}, apierror.New(apierror.AgentNotAlive, "The agent is %s: only a ready, working or idle agent pauses.", sess.State)
		}
		after, err := s.await(ctx, id, func(st session.State) bool { return st != session.Pausing })
		if err != nil {
			return PauseStatus{}, err
		}
		if slices.Contains(session.Running, after.State) {
			return PauseStatus{}, &apierror.Error{Code: apierror.ServiceUnavailable, RetryAfter: apierror.UnavailableRetryAfter,
				Message: "The agent's checkpoint could not be written, so it was not paused and runs on; try again."}
		}
		return s.pauseStatus(ctx, after)
	}
	return PauseStatus{}, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The agent is changing state; try again.", RetryAfter: 1}
}

// ResumeRequest is a resume's optional body: the checkpoint to go on from
// ("": the last).
type ResumeRequest struct {
	CheckpointID string `json:"checkpoint_id,omitempty"`
}

// Resume resumes a paused agent from its last checkpoint (or the one in),
// in a sandbox launched for it (a new launch generation): the same agent
// id, session tokens and embed URL. It answers once the agent is ready, as
// create does, or when Wait passed (state resuming: resume again to keep
// waiting). A resume that cannot start leaves the agent paused.
func (s *Service) Resume(ctx context.Context, id, bearer string, in ResumeRequest) (PauseStatus, error) {
	for range pauseRetries {
		sess, err := s.killAuthorize(ctx, id, bearer)
		if err != nil {
			return PauseStatus{}, err
		}
		if in.CheckpointID != "" && sess.State == session.Paused {
			if s.o.Checkpoints == nil || !checkpoint.ValidID(in.CheckpointID) {
				return PauseStatus{}, apierror.New(apierror.CheckpointNotFound, "The agent has no checkpoint %q.", in.CheckpointID)
			}
			if _, err := s.o.Checkpoints.Get(ctx, id, in.CheckpointID); errors.Is(err, checkpoint.ErrNotFound) {
				return PauseStatus{}, apierror.New(apierror.CheckpointNotFound, "The agent has no checkpoint %q.", in.CheckpointID)
			} else if err != nil {
				return PauseStatus{}, err
			}
		}
		switch {
		case slices.Contains(session.Running, sess.State):
			return s.pauseStatus(ctx, sess) // running already
		case sess.State == session.Resuming:
		case sess.State == session.Paused:
			_, err := session.StartResume(ctx, s.o.Store, s.o.Jobs, s.o.Log, sess, in.CheckpointID, s.o.Now().UTC())
			if errors.Is(err, session.ErrConflict) {
				continue
			}
			if err != nil {
				return PauseStatus{}, err
			}
		default:
			return PauseStatus{}, apierror.New(apierror.AgentNotAlive, "The agent is %s: only a paused agent resumes.", sess.State)
		}
		after, err := s.await(ctx, id, func(st session.State) bool { return st != session.Resuming })
		if err != nil {
			return PauseStatus{}, err
		}
		if after.State == session.Paused {
			return PauseStatus{}, &apierror.Error{Code: apierror.ServiceUnavailable, RetryAfter: apierror.UnavailableRetryAfter,
				Message: "The agent's sandbox could not be started from its checkpoint; it stays paused. Try again."}
		}
		return s.pauseStatus(ctx, after)
	}
	return PauseStatus{}, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The agent is changing state; try again.", RetryAfter: 1}
}

// Checkpoints lists a page of an agent's checkpoints (its app key or one of
// its session tokens), oldest first: limit (0: 20) after cursor.
func (s *Service) Checkpoints(ctx context.Context, id, bearer, cursor string, limit int) (CheckpointList, error) {
	if limit < 0 || limit > 100 {
		return CheckpointList{}, apierror.New(apierror.InvalidRequest, "limit must be 1 to 100.")
	}
	if _, err := s.killAuthorize(ctx, id, bearer); err != nil {
		return CheckpointList{}, err
	}
	out := CheckpointList{AgentID: id, Checkpoints: []sandboxwire.Checkpoint{}}
	if s.o.Checkpoints == nil {
		return out, nil
	}
	if cursor != "" && !checkpoint.ValidID(cursor) {
		return CheckpointList{}, apierror.New(apierror.InvalidRequest, "cursor is not one this list gave.")
	}
	if limit == 0 {
		limit = 20
	}
	list, next, err := s.o.Checkpoints.List(ctx, id, cursor, limit)
	if err != nil {
		return CheckpointList{}, err
	}
	out.Checkpoints, out.NextCursor = append(out.Checkpoints, list...), next
	return out, nil
}

// pauseStatus is sess as a pause or resume answers it.
func (s *Service) pauseStatus(ctx context.Context, sess session.Session) (PauseStatus, error) {
	out := PauseStatus{AgentID: sess.ID, Alive: slices.Contains(session.Live, sess.State), State: sess.State, Status: session.StatusOf(sess.State), Reason: sess.Reason}
	if sess.CheckpointID != "" && s.o.Checkpoints != nil {
		cp, err := s.o.Checkpoints.Get(ctx, sess.ID, sess.CheckpointID)
		if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			return PauseStatus{}, err
		}
		if err == nil {
			out.Checkpoint = &cp
		}
	}
	return out, nil
}

// await polls session id until done holds for its state, it ends, or Wait
// passes; it returns the session as it then is.
func (s *Service) await(ctx context.Context, id string, done func(session.State) bool) (session.Session, error) {
	wait := s.o.Wait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	deadline := s.o.Now().Add(wait)
	delay := 10 * time.Millisecond
	for {
		sess, err := s.o.Store.Get(ctx, id)
		if err != nil {
			return session.Session{}, err
		}
		if done(sess.State) || sess.State.Terminal() || !s.o.Now().Before(deadline) {
			return sess, nil
		}
		select {
		case <-ctx.Done():
			return session.Session{}, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}
