package session

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// ControlOptions configure a Control.
type ControlOptions struct {
	Store Store
	// Guardrails are the platform's current guardrails, which alive
	// compares the session's with.
	Guardrails guardrails.Source
	// Jobs queues the stop of a session that ends.
	Jobs Publisher
	// Limits are the platform's session limits (an agent type may lower
	// them); a zero part is no bound.
	Limits registry.SessionLimits
	// Notifier, if set, pushes a shutdown to the session's sandbox at once
	// (see Pushing).
	Notifier Notifier
	Log      *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Control serves the alive and shutdown routes of a session's token holder.
type Control struct {
	Access
	o ControlOptions
}

// NewControl returns a control with options o.
func NewControl(o ControlOptions) *Control {
	o.Now, o.Log = clock(o.Now), logger(o.Log)
	o.Store = Pushing(o.Store, o.Notifier, o.Log)
	return &Control{Access: Access{Store: o.Store, Now: o.Now}, o: o}
}

// AliveStatus answers the alive route.
type AliveStatus struct {
	AgentID string `json:"agent_id"`
	Alive   bool   `json:"alive"`
	State   string `json:"state"`
	// Status is State in the workspace spec's words (StatusOf).
	Status            string `json:"status"`
	GuardrailsVersion string `json:"guardrails_version"`
	GuardrailsStale   bool   `json:"guardrails_stale"`
	// Usage is what the agent's model calls used so far, as the platform's
	// model gateway metered them.
	Usage Usage `json:"usage"`
	// Workspace is how its workspace was provisioned, once it was ready
	// (as create answered it); absent while provisioning.
	Workspace *sandboxwire.WorkspaceStatus `json:"workspace,omitempty"`
	// FromPool says whether its sandbox came from its type's warm pool.
	FromPool bool `json:"from_pool"`
	// Limits are the session's limits (0: none), and Remaining what it has
	// left of them.
	Limits    registry.SessionLimits `json:"limits"`
	Remaining Remaining              `json:"remaining"`
	// Egress is what its sandbox may reach now, besides the platform
	// (absent for an unknown agent).
	Egress *egress.Policy `json:"egress,omitempty"`
}

// Alive reports whether a session is still active, that is not ended: a
// provisioning or ending agent is alive, and State says which.
func (s *Control) Alive(ctx context.Context, id, tok string) (AliveStatus, error) {
	if tok == "" {
		return AliveStatus{}, apierror.New(apierror.MissingToken, "A session token is required.")
	}
	unknown := AliveStatus{AgentID: id, Alive: false, State: "unknown", Status: "unknown"}
	if !sessionID.MatchString(id) {
		return unknown, nil
	}
	sess, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return unknown, nil
	}
	if err != nil {
		return AliveStatus{}, err
	}
	if err := checkToken(sess, tok, s.o.Now()); err != nil {
		return AliveStatus{}, err
	}
	if sess.Lost(s.o.Now()) {
		lost, err := s.o.Store.Transition(ctx, id, LostChange(sess, s.o.Now()))
		switch {
		case err == nil:
			sess = lost
			// Whatever is left of the silent sandbox is stopped for good.
			if err := s.o.Jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.SessionStop, SessionID: id, Generation: sess.Generation}, 0); err != nil {
				s.o.Log.WarnContext(ctx, "publish session.stop for lost session", slog.String("session_id", id), slog.String("error", err.Error()))
			}
		case !errors.Is(err, ErrConflict):
			return AliveStatus{}, err
		}
	}
	current := ""
	if doc, err := guardrails.Load(ctx, s.o.Guardrails); err == nil {
		current = doc.Hash
	}
	var ws *sandboxwire.WorkspaceStatus
	if !sess.ReadyAt.IsZero() {
		st := workspaceStatus(sess)
		ws = &st
	}
	limits := EffectiveLimits(s.o.Limits, sess)
	return AliveStatus{
		Workspace:         ws,
		AgentID:           id,
		Alive:             slices.Contains(Live, sess.State) && !sess.Lost(s.o.Now()), // not ended (the spec)
		State:             string(sess.State),
		Status:            StatusOf(sess.State),
		GuardrailsVersion: sess.GuardrailsHash,
		GuardrailsStale:   sess.GuardrailsHash != "" && sess.GuardrailsHash != current,
		Usage:             sess.Usage(),
		FromPool:          sess.PoolSandbox != "",
		Limits:            limits,
		Remaining:         RemainingOf(limits, sess, s.o.Now()),
		Egress:            egressView(sess),
	}, nil
}

// ShutdownStatus answers the shutdown route.
type ShutdownStatus struct {
	AgentID string `json:"agent_id"`
	Status  string `json:"status"`
}

// Shutdown statuses.
const (
	ShutdownInitiated  = "shutdown_initiated"
	AlreadyTerminated  = "already_terminated"
	maxShutdownRetries = 3
)

// Shutdown asks a session's sandbox to stop: the session moves to ending (which its
// inbox reports as stop), and session.stop, after StopGrace, stops it for good.
// A shutdown of an ending session queues session.stop again (it is idempotent),
// so that a shutdown whose stop could not be queued is finished by a retry.
func (s *Control) Shutdown(ctx context.Context, id, tok string) (ShutdownStatus, error) {
	for range maxShutdownRetries {
		sess, err := s.Authorize(ctx, id, tok)
		if err != nil {
			return ShutdownStatus{}, err
		}
		switch {
		case sess.State.Terminal():
			return ShutdownStatus{AgentID: id, Status: AlreadyTerminated}, nil
		case sess.State != Ending:
			_, err = s.o.Store.Transition(ctx, id, Change{From: []State{Provisioning, Ready, Working, Idle}, To: Ending, Reason: ReasonShutdown})
			if errors.Is(err, ErrConflict) {
				continue // it moved meanwhile: look again
			}
			if err != nil {
				return ShutdownStatus{}, err
			}
		}
		if err := s.o.Jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.SessionStop, SessionID: id, Generation: sess.Generation}, StopGrace); err != nil {
			s.o.Log.WarnContext(ctx, "publish session.stop", slog.String("session_id", id), slog.String("error", err.Error()))
			return ShutdownStatus{}, &apierror.Error{
				Code:       apierror.ServiceUnavailable,
				Message:    "The agent is ending, but its stop could not be queued; retry the shutdown.",
				RetryAfter: apierror.UnavailableRetryAfter,
			}
		}
		return ShutdownStatus{AgentID: id, Status: ShutdownInitiated}, nil
	}
	return ShutdownStatus{}, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The agent is changing state; try again.", RetryAfter: 1}
}
