package session

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/token"
)

// Fork makes a new agent from the last checkpoint of agent id (bearer: the
// app key of its tenant, or one of its session tokens): its blueprint (the
// project, persona, agent type and workspace configuration, limits) and a
// copy of that checkpoint, its own from then on, so that the two diverge
// and the source is untouched. The new agent is admitted within its app's
// quotas, started from the copy as a resume is, and answered as create
// answers, once ready.
func (s *Creator) Fork(ctx context.Context, id, bearer string) (Created, error) {
	src, err := s.forkSource(ctx, id, bearer)
	if err != nil {
		return Created{}, err
	}
	if s.o.Checkpoints == nil || src.CheckpointID == "" {
		return Created{}, apierror.New(apierror.CheckpointNotFound, "The agent has no checkpoint to fork from yet: pause it first.")
	}
	cp, err := s.o.Checkpoints.Get(ctx, src.ID, src.CheckpointID)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return Created{}, apierror.New(apierror.CheckpointNotFound, "The agent's checkpoint is gone.")
	}
	if err != nil {
		return Created{}, err
	}
	now := s.o.Now().UTC()
	// Its app's spend caps as the source's create copied them.
	app := registry.AppKey{ID: src.AppKeyID, Tenant: src.Tenant}
	if c := src.AppCaps; c != nil {
		app.MaxCostUSDPerDay, app.MaxCostUSDPerMonth = c.PerDayUSD, c.PerMonthUSD
	}
	if err := s.checkBudget(ctx, app, now); err != nil {
		return Created{}, err
	}
	fork := newID()
	if _, err := s.o.Checkpoints.Fork(ctx, src.ID, fork, cp); err != nil {
		return Created{}, err
	}
	plain, hash := token.New(token.Session)
	sess := Session{
		ID: fork, Blueprint: src.Blueprint, AppKeyID: src.AppKeyID, Tenant: src.Tenant,
		DueAt: now.Add(ProvisioningLimit), State: Resuming, Generation: 1, TokenHashes: []string{hash},
		CreatedAt: now, UpdatedAt: now, CheckpointID: cp.ID,
	}
	sess.TmuxSessionName = "ra-" + fork[:8]
	if src.Egress != nil {
		p := egress.Policy{Mode: src.Egress.Mode, Allow: slices.Clone(src.Egress.Allow)}
		sess.Egress = &p
	}
	adm := s.admission(now)
	err = s.o.Store.Admit(ctx, sess, nil, adm)
	if q := s.overQuota(err, adm, now); q != nil {
		s.quotaExceeded(ctx, src.Tenant, q, now)
		_ = s.o.Checkpoints.Delete(context.WithoutCancel(ctx), fork)
		return Created{}, q
	}
	if err != nil {
		_ = s.o.Checkpoints.Delete(context.WithoutCancel(ctx), fork)
		return Created{}, err
	}
	if err := s.o.Jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.SessionStart, SessionID: fork, Generation: 1}, 0); err != nil {
		s.o.Log.WarnContext(ctx, "publish session.start for a fork", slog.String("session_id", fork), slog.String("error", err.Error()))
		s.fail(ctx, fork, 1, ReasonError)
		return Created{}, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The fork could not be started; try again.", RetryAfter: apierror.UnavailableRetryAfter}
	}
	ready, err := s.waitReady(ctx, fork)
	if errors.Is(err, errNotReady) {
		// Its token goes with it: without it the caller could never reach
		// the fork once it is ready.
		return Created{}, &apierror.Error{Code: apierror.AgentCreationTimeout, RetryAfter: 1, Details: map[string]any{"agent_id": fork, "session_token": plain},
			Message: "The fork was not ready within " + s.o.CreationTimeout.String() + "; it goes on starting (its id and session token are in details)."}
	}
	if err != nil {
		return Created{}, err
	}
	return s.created(ready, plain), nil
}

// forkSource is agent id, which bearer may fork (AuthorizeAgent).
func (s *Creator) forkSource(ctx context.Context, id, bearer string) (Session, error) {
	return AuthorizeAgent(ctx, s.o.Store, s.Authenticate, id, bearer, s.o.Now())
}

// AuthorizeAgent finds agent id and checks that bearer may act on it: one
// of its session tokens (by its form), or an app key of its tenant
// (authenticate; anything else is taken for an app key). An agent of
// another tenant is not found, as an unknown one is.
func AuthorizeAgent(ctx context.Context, store Reader, authenticate func(context.Context, string) (registry.AppKey, error), id, bearer string, now time.Time) (Session, error) {
	if bearer == "" || token.Check(token.Session, bearer) == nil {
		return Authorize(ctx, store, id, bearer, now)
	}
	app, err := authenticate(ctx, bearer)
	if err != nil {
		return Session{}, err
	}
	if !ValidID(id) {
		return Session{}, malformedID()
	}
	notFound := apierror.New(apierror.AgentNotFound, "No agent has the id %q.", id)
	sess, err := store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && sess.Tenant != app.Tenant) {
		return Session{}, notFound
	}
	return sess, err
}
