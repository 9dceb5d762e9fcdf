package fleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// EgressStatus answers a change of an agent's egress policy.
type EgressStatus struct {
	AgentID string        `json:"agent_id"`
	Egress  egress.Policy `json:"egress"`
	// Version counts the policy's changes.
	Version int `json:"version"`
}

// SetEgress replaces the egress policy of a live agent: its sandbox's
// proxy holds it to the new one within egressproxy.DefaultTTL. With the
// agent's session token the change may only narrow it (what it allows, the
// old policy allowed); the app key of its tenant may change it either
// way. An agent whose sandbox was started with open egress is not cut off
// from the network, so no policy but open can hold for it (409
// egress_not_isolated): its agent type's policy decides that at its start.
func (s *Service) SetEgress(ctx context.Context, id, bearer string, p egress.Policy) (EgressStatus, error) {
	if problem := p.Problem(""); problem != "" {
		return EgressStatus{}, apierror.New(apierror.InvalidRequest, "%s", problem)
	}
	if p.Allow == nil {
		p.Allow = []string{}
	}
	bySession := bearer == "" || token.Check(token.Session, bearer) == nil
	for range maxKillRetries {
		sess, err := s.killAuthorize(ctx, id, bearer)
		if err != nil {
			return EgressStatus{}, err
		}
		now := sess.EgressPolicy()
		switch {
		case sess.State.Terminal() || sess.State == session.Ending:
			return EgressStatus{}, apierror.New(apierror.AgentNotAlive, "The agent is %s: its egress policy no longer changes.", sess.State)
		case !now.Isolated() && p.Isolated():
			return EgressStatus{}, apierror.New(apierror.EgressNotIsolated, "This agent's sandbox was started with open egress, so it is not cut off from the network and no allowlist can hold for it. Give its agent type an allowlist (workspace_config.egress) and start a new agent.")
		case bySession && !egress.Narrows(now, p):
			return EgressStatus{}, apierror.New(apierror.Forbidden, "A session token may only narrow the agent's egress policy; widen it with the app key.")
		}
		out, err := s.o.Store.SetEgress(ctx, id, sess.EgressVersion, p)
		if errors.Is(err, session.ErrConflict) {
			continue // changed meanwhile: decide again on what it is now
		}
		if err != nil {
			return EgressStatus{}, fmt.Errorf("set the egress policy of %s: %w", id, err)
		}
		return EgressStatus{AgentID: id, Egress: out.EgressPolicy(), Version: out.EgressVersion}, nil
	}
	return EgressStatus{}, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The agent's egress policy is changing; try again.", RetryAfter: 1}
}
