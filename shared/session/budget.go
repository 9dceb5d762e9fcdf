package session

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Spend caps are held where money is spent: before each model call the
// gateway holds the call's most it can cost against every capped scope (the
// session, its tenant's day and month) in one conditional write, and settles
// the hold with what the call cost once it has ended. A scope admits a call
// while what it has spent and holds leaves room for the call's hold, or
// while nothing else is held and it has not reached its cap: so no call
// starts past a cap, and a scope passes its cap by at most the last call's
// cost, even when the hold guessed low.

// The scopes a cap bounds, as BudgetError and the budget.exceeded event
// name them.
const (
	ScopeSession     = "session"
	ScopeTenantDay   = "day"
	ScopeTenantMonth = "month"
)

// CapName is the configuration's name of scope's cap (a 429's
// details.budget).
func CapName(scope string) string {
	switch scope {
	case ScopeTenantDay:
		return "max_cost_usd_per_day"
	case ScopeTenantMonth:
		return "max_cost_usd_per_month"
	}
	return "max_cost_usd"
}

// Periods of the tenant's spend: the UTC day and month that hold t.
func Day(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

// Month is the first instant of the UTC month that holds t.
func Month(t time.Time) time.Time {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// PeriodEnd is when the period of scope that holds t ends (zero for the
// session's, which has none).
func PeriodEnd(scope string, t time.Time) time.Time {
	switch scope {
	case ScopeTenantDay:
		return Day(t).Add(24 * time.Hour)
	case ScopeTenantMonth:
		return Month(t).AddDate(0, 1, 0)
	}
	return time.Time{}
}

// Hold is what one model call holds against its scopes: MicroUSD, the most
// it can cost, against the session's cap and its tenant's day's and
// month's (micro-USD; 0 is no cap, and nothing is held there).
type Hold struct {
	SessionID string
	Tenant    string
	// At is when the call began: its day and month.
	At       time.Time
	MicroUSD int64

	SessionCap, DayCap, MonthCap int64
}

// Capped reports whether h holds anything anywhere.
func (h Hold) Capped() bool { return h.SessionCap > 0 || h.DayCap > 0 || h.MonthCap > 0 }

// ErrOverBudget: a Hold would start a call past a cap (see BudgetError).
var ErrOverBudget = errors.New("over budget")

// BudgetError is the ErrOverBudget of a Hold: the scope that refused, and
// whether it has reached its cap (Exhausted: no call starts there before
// the period ends) or only holds its rest for calls under way.
type BudgetError struct {
	Scope     string
	Exhausted bool
	// CapMicroUSD is the scope's cap, SpentMicroUSD what it has spent.
	CapMicroUSD, SpentMicroUSD int64
}

func (e *BudgetError) Error() string {
	state := "held by calls under way"
	if e.Exhausted {
		state = "reached"
	}
	return fmt.Sprintf("the %s budget of %d micro-USD is %s (%d spent)", e.Scope, e.CapMicroUSD, state, e.SpentMicroUSD)
}

// Unwrap makes a BudgetError an ErrOverBudget.
func (e *BudgetError) Unwrap() error { return ErrOverBudget }

// Spent is a scope's spend in a period: what its calls cost, and what calls
// under way hold.
type Spent struct {
	MicroUSD     int64 `json:"micro_usd"`
	HeldMicroUSD int64 `json:"held_micro_usd"`
}

// Budgets holds and settles model calls against the spend caps.
type Budgets interface {
	// Hold holds h.MicroUSD against each scope h caps, all or none; a
	// *BudgetError (ErrOverBudget) when a scope refuses, ErrNotFound
	// without the session.
	Hold(ctx context.Context, h Hold) error
	// Settle records what the call of hold h used (u, costed) on its
	// session and its tenant's day and month, and gives back what h held,
	// in one write; ErrNotFound without the session.
	Settle(ctx context.Context, h Hold, u Usage) error
	// TenantSpend reads tenant's spend of the period of scope (day or
	// month) that holds t.
	TenantSpend(ctx context.Context, tenant, scope string, t time.Time) (Spent, error)
}
