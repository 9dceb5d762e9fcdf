package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/session"
)

var _ session.Budgets = (*Sessions)(nil)

// A tenant's spend of a period is an item of the idempotency table
// ("spend#<tenant>#<yyyy-mm-dd>" for a day, "spend#<tenant>#<yyyy-mm>" for a
// month): micro_usd, what its calls cost; held, what calls under way hold;
// committed, the two together (a condition compares one attribute). A
// session keeps the same on its item: cost_micro_usd, cost_held and
// cost_committed.

// periodKey is the item of tenant's spend in the period of scope that holds t.
func periodKey(tenant, scope string, t time.Time) map[string]string {
	if scope == session.ScopeTenantMonth {
		return map[string]string{"key": "spend#" + tenant + "#" + t.UTC().Format("2006-01")}
	}
	return spendKey(tenant, session.Day(t))
}

// periodExpiry is when a period's item expires: well after the period, so
// the usage route reads the last one too.
func periodExpiry(scope string, t time.Time) int64 {
	return session.PeriodEnd(scope, t).Add(40 * 24 * time.Hour).Unix()
}

// spendNames are the attributes of a scope's spend: on a session's item, on
// a period's.
type spendNames struct{ spent, held, committed expression.NameBuilder }

var (
	sessionSpend = spendNames{expression.Name("cost_micro_usd"), expression.Name("cost_held"), expression.Name("cost_committed")}
	periodSpend  = spendNames{expression.Name("micro_usd"), expression.Name("held"), expression.Name("committed")}
)

// admits is the condition that a scope with cap admits a hold of r: what
// it committed leaves room for r, or nothing is held and it is under its cap.
func (n spendNames) admits(r, limit int64) expression.ConditionBuilder {
	idle := expression.Or(expression.AttributeNotExists(n.held), n.held.Equal(expression.Value(0)))
	return expression.Or(expression.AttributeNotExists(n.committed),
		n.committed.LessThanEqual(expression.Value(limit-r)),
		expression.And(idle, n.committed.LessThan(expression.Value(limit))))
}

// move adds spent to a scope's spend and held to its hold.
func (n spendNames) move(up expression.UpdateBuilder, spent, held int64) expression.UpdateBuilder {
	if spent != 0 {
		up = up.Add(n.spent, expression.Value(spent))
	}
	if held != 0 {
		up = up.Add(n.held, expression.Value(held))
	}
	if spent+held != 0 {
		up = up.Add(n.committed, expression.Value(spent+held))
	}
	return up
}

// scopeOp is one scope's part of a hold.
type scopeOp struct {
	scope string
	table *Table
	key   any
	up    expression.UpdateBuilder
	cond  expression.ConditionBuilder
}

// Hold holds h.MicroUSD against each capped scope of h in one write.
func (s *Sessions) Hold(ctx context.Context, h session.Hold) error {
	var ops []scopeOp
	if h.SessionCap > 0 {
		up := sessionSpend.move(expression.UpdateBuilder{}, 0, h.MicroUSD)
		cond := expression.AttributeExists(expression.Name("session_id")).And(sessionSpend.admits(h.MicroUSD, h.SessionCap))
		ops = append(ops, scopeOp{session.ScopeSession, s.sessions, sessionKey{h.SessionID}, up, cond})
	}
	for _, p := range []struct {
		scope string
		limit int64
	}{{session.ScopeTenantDay, h.DayCap}, {session.ScopeTenantMonth, h.MonthCap}} {
		if p.limit <= 0 || h.Tenant == "" {
			continue
		}
		key := periodKey(h.Tenant, p.scope, h.At)
		up := periodSpend.move(expression.Set(expression.Name("expires_at"), expression.Value(periodExpiry(p.scope, h.At))), 0, h.MicroUSD)
		ops = append(ops, scopeOp{p.scope, s.idempotency, key, up, periodSpend.admits(h.MicroUSD, p.limit)})
	}
	if len(ops) == 0 {
		return nil
	}
	if len(ops) == 1 {
		err := ops[0].table.Update(ctx, ops[0].key, ops[0].up, nil, ops[0].cond)
		if errors.Is(err, ErrConditionFailed) {
			return s.refusal(ctx, ops[0], h)
		}
		return err
	}
	txOps := make([]TxOp, len(ops))
	for i, o := range ops {
		txOps[i] = o.table.UpdateOp(o.key, o.up, o.cond)
	}
	err := Transact(ctx, s.api, "", txOps...)
	var canceled *TxCanceledError
	if !errors.As(err, &canceled) {
		if err != nil {
			return fmt.Errorf("hold %d micro-USD for session %s: %w", h.MicroUSD, h.SessionID, err)
		}
		return nil
	}
	for i, o := range ops {
		if i >= len(canceled.Reasons) || canceled.Reasons[i] != "ConditionalCheckFailed" {
			continue
		}
		return s.refusal(ctx, o, h)
	}
	return fmt.Errorf("hold for session %s: %w", h.SessionID, err)
}

// refusal reads the scope that refused a hold: gone (the session), or a
// BudgetError saying whether the scope has reached its cap.
func (s *Sessions) refusal(ctx context.Context, o scopeOp, h session.Hold) error {
	var it struct {
		Session   string `json:"session_id"`
		Spent     int64  `json:"micro_usd"`
		CostSpent int64  `json:"cost_micro_usd"`
	}
	err := o.table.Get(ctx, o.key, &it)
	if o.scope == session.ScopeSession && (errors.Is(err, ErrNotFound) || err == nil && it.Session == "") {
		return fmt.Errorf("session %s: %w", h.SessionID, session.ErrNotFound)
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	limit, spent := map[string]int64{session.ScopeSession: h.SessionCap, session.ScopeTenantDay: h.DayCap, session.ScopeTenantMonth: h.MonthCap}[o.scope], it.Spent
	if o.scope == session.ScopeSession {
		spent = it.CostSpent
	}
	return &session.BudgetError{Scope: o.scope, Exhausted: spent >= limit, CapMicroUSD: limit, SpentMicroUSD: spent}
}

// Settle records the call's usage on its session and its cost on its
// tenant's day and month, and gives back what h held, in one write.
func (s *Sessions) Settle(ctx context.Context, h session.Hold, u session.Usage) error {
	held := func(limit int64) int64 {
		if limit > 0 {
			return h.MicroUSD
		}
		return 0
	}
	up := sessionSpend.move(expression.Add(expression.Name("input_tokens"), expression.Value(u.InputTokens)).
		Add(expression.Name("output_tokens"), expression.Value(u.OutputTokens)).
		Add(expression.Name("cached_tokens"), expression.Value(u.CachedTokens)).
		Add(expression.Name("model_calls"), expression.Value(u.Calls)).
		// A model call is activity (the idle timeout's).
		Set(expression.Name("last_activity_at"), expression.Value(s.now().UTC().Format(time.RFC3339Nano))), u.CostMicroUSD, -held(h.SessionCap))
	exists := expression.AttributeExists(expression.Name("session_id"))
	ops := []TxOp{s.sessions.UpdateOp(sessionKey{h.SessionID}, up, exists)}
	for _, p := range []struct {
		scope string
		limit int64
	}{{session.ScopeTenantDay, h.DayCap}, {session.ScopeTenantMonth, h.MonthCap}} {
		if h.Tenant == "" || (u.CostMicroUSD == 0 && held(p.limit) == 0) {
			continue
		}
		pu := periodSpend.move(expression.Set(expression.Name("expires_at"), expression.Value(periodExpiry(p.scope, h.At))), u.CostMicroUSD, -held(p.limit))
		ops = append(ops, s.idempotency.UpdateOp(periodKey(h.Tenant, p.scope, h.At), pu))
	}
	var err error
	if len(ops) == 1 {
		// The session's usage alone: one update (a transaction costs twice).
		err = s.sessions.Update(ctx, sessionKey{h.SessionID}, up, nil, exists)
	} else {
		err = Transact(ctx, s.api, "", ops...)
	}
	var canceled *TxCanceledError
	if errors.Is(err, ErrConditionFailed) || errors.As(err, &canceled) && len(canceled.Reasons) > 0 && canceled.Reasons[0] == "ConditionalCheckFailed" {
		return fmt.Errorf("session %s: %w", h.SessionID, session.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("settle a model call of session %s: %w", h.SessionID, err)
	}
	return nil
}

// TenantSpend reads tenant's spend of the period of scope that holds t.
func (s *Sessions) TenantSpend(ctx context.Context, tenant, scope string, t time.Time) (session.Spent, error) {
	var it struct {
		Spent int64 `json:"micro_usd"`
		Held  int64 `json:"held"`
	}
	err := s.idempotency.Get(ctx, periodKey(tenant, scope, t), &it)
	if errors.Is(err, ErrNotFound) {
		return session.Spent{}, nil
	}
	return session.Spent{MicroUSD: it.Spent, HeldMicroUSD: it.Held}, err
}
