// Package usage answers an app what it holds and spends against its quotas
// and caps (GET /api/v1/usage): its live agents against its live quota, its
// model spend of the UTC day and month against its caps (the platform's and
// its app key's, the lower holding), with what calls under way hold. The app
// reads and sets its own key's limits (GET, PUT /api/v1/limits): they can
// only narrow the platform's.
package usage

import (
	"context"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Store reads the counters: the tenant's live count and its spend.
type Store interface {
	LiveCount(ctx context.Context, tenant string) (int, error)
	TenantSpend(ctx context.Context, tenant, scope string, t time.Time) (session.Spent, error)
}

// Keys sets an app key's limits (dynamo.Registry).
type Keys interface {
	SetAppKeyLimits(ctx context.Context, hash string, l registry.AppKeyLimits) (registry.AppKey, error)
}

// Options configure a Service.
type Options struct {
	Store Store
	Keys  Keys
	// Platform are the platform's session limits (a type may lower them).
	Platform registry.SessionLimits
	// LiveQuota is the platform's live agents per app (0: none).
	LiveQuota int
	// DayCapUSD and MonthCapUSD are the platform's spend caps per app (0:
	// none).
	DayCapUSD, MonthCapUSD float64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service reads an app's usage.
type Service struct{ o Options }

// New returns a Service.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o}
}

// Usage is what GET /api/v1/usage answers.
type Usage struct {
	LiveAgents Live `json:"live_agents"`
	// Spend is the app's model spend by period: "day" and "month" (UTC).
	Spend map[string]Period `json:"spend"`
}

// Live is the app's live agents and its quota (omitted: none).
type Live struct {
	Count int `json:"count"`
	Quota int `json:"quota,omitempty"`
}

// Period is the app's spend of one period against its cap.
type Period struct {
	StartsAt time.Time `json:"starts_at"`
	ResetsAt time.Time `json:"resets_at"`
	SpentUSD float64   `json:"spent_usd"`
	// HeldUSD is what model calls under way hold of the cap.
	HeldUSD float64 `json:"held_usd"`
	// CapUSD is the cap (omitted: none), RemainingUSD what is left of it.
	CapUSD       float64  `json:"cap_usd,omitempty"`
	RemainingUSD *float64 `json:"remaining_usd,omitempty"`
}

// Of is app's usage now.
func (s *Service) Of(ctx context.Context, app registry.AppKey) (Usage, error) {
	now := s.o.Now().UTC()
	live, err := s.o.Store.LiveCount(ctx, app.Tenant)
	if err != nil {
		return Usage{}, err
	}
	out := Usage{LiveAgents: Live{Count: live, Quota: s.o.LiveQuota}, Spend: map[string]Period{}}
	for _, p := range []struct {
		scope string
		start time.Time
		limit float64
	}{
		{session.ScopeTenantDay, session.Day(now), session.LowerCap(s.o.DayCapUSD, app.MaxCostUSDPerDay)},
		{session.ScopeTenantMonth, session.Month(now), session.LowerCap(s.o.MonthCapUSD, app.MaxCostUSDPerMonth)},
	} {
		sp, err := s.o.Store.TenantSpend(ctx, app.Tenant, p.scope, now)
		if err != nil {
			return Usage{}, err
		}
		period := Period{StartsAt: p.start, ResetsAt: session.PeriodEnd(p.scope, now), SpentUSD: float64(sp.MicroUSD) / 1e6, HeldUSD: float64(sp.HeldMicroUSD) / 1e6, CapUSD: p.limit}
		if p.limit > 0 {
			left := max(0, p.limit-period.SpentUSD)
			period.RemainingUSD = &left
		}
		out.Spend[p.scope] = period
	}
	return out, nil
}

// Limits are an app key's limits, the platform's, and the effective ones
// (the lower of each; 0: none) for the sessions it creates from now on.
type Limits struct {
	AppKey    registry.AppKeyLimits `json:"app_key"`
	Platform  registry.AppKeyLimits `json:"platform"`
	Effective registry.AppKeyLimits `json:"effective"`
}

// LimitsOf are app's limits.
func (s *Service) LimitsOf(app registry.AppKey) Limits {
	p := registry.AppKeyLimits{Limits: &s.o.Platform, MaxCostUSDPerDay: s.o.DayCapUSD, MaxCostUSDPerMonth: s.o.MonthCapUSD}
	own := app.LimitsOf()
	eff := session.EffectiveLimits(s.o.Platform, session.Session{Blueprint: session.Blueprint{AppLimits: own.Limits}})
	return Limits{AppKey: own, Platform: p, Effective: registry.AppKeyLimits{Limits: &eff,
		MaxCostUSDPerDay: session.LowerCap(p.MaxCostUSDPerDay, own.MaxCostUSDPerDay), MaxCostUSDPerMonth: session.LowerCap(p.MaxCostUSDPerMonth, own.MaxCostUSDPerMonth)}}
}

// SetLimits replaces app's key's limits with l, validated (400
// invalid_request), and answers its limits as they now stand. They bound
// the sessions the key creates from now on; those running keep theirs.
func (s *Service) SetLimits(ctx context.Context, app registry.AppKey, l registry.AppKeyLimits) (Limits, error) {
	if p := l.Problem(); p != "" {
		return Limits{}, apierror.New(apierror.InvalidRequest, "%s", p)
	}
	if l.Limits != nil && *l.Limits == (registry.SessionLimits{}) {
		l.Limits = nil
	}
	k, err := s.o.Keys.SetAppKeyLimits(ctx, app.Hash, l)
	if err != nil {
		return Limits{}, err
	}
	return s.LimitsOf(k), nil
}
