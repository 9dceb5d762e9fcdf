package modelgateway

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/metrics"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Store is what the gateway does with sessions: reads them (their sandbox
// tokens), holds and settles their calls against the spend caps
// (session.Budgets), ends a session whose cap is spent and tells it why,
// and notes a provider's rate limit (Touch).
type Store interface {
	// Get reads a session; session.ErrNotFound if absent.
	Get(ctx context.Context, id string) (session.Session, error)
	session.Budgets
	// Transition ends a session whose budget is spent (ending).
	Transition(ctx context.Context, id string, c session.Change) (session.Session, error)
	// AppendEvents tells it (budget.exceeded).
	AppendEvents(ctx context.Context, id string, generation int, events []session.Event) ([]session.Event, error)
	// Touch sets fields on a live session of generation gen;
	// session.ErrConflict otherwise.
	Touch(ctx context.Context, id string, gen int, set session.Fields) (session.Session, error)
}

// Options configure a Gateway.
type Options struct {
	// Store holds the sessions: their sandbox tokens and usage.
	Store Store
	// Model is the platform's model configuration: providers served, models
	// allowed, upstreams.
	Model config.Model
	// Keys holds the providers' API keys.
	Keys Keys
	// Region is the AWS region, for Bedrock's default endpoint.
	Region string
	// Prices is the price table calls are costed by; nil costs nothing.
	Prices Prices
	// Caps are the platform's spend caps (see Admit).
	Caps Caps
	Log  *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Gateway decides the model calls of sandboxes and meters them.
type Gateway struct {
	o Options
}

// New returns a gateway.
func New(o Options) *Gateway {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Gateway{o: o}
}

// Authorize returns the session whose current sandbox holds tok (see
// session.AuthenticateSandbox: a session token is 403, another session's
// sandbox token or that of a session that is over 401) and the provider
// named, which the platform must serve: an unknown one is not_found, one the
// platform does not serve forbidden.
func (g *Gateway) Authorize(ctx context.Context, id, tok, provider string) (session.Session, Provider, error) {
	sess, err := session.AuthenticateSandbox(ctx, g.o.Store, id, tok)
	if err != nil {
		return session.Session{}, Provider{}, err
	}
	p, ok := ProviderNamed(provider)
	if !ok {
		return session.Session{}, Provider{}, apierror.New(apierror.NotFound, "No such model provider.")
	}
	if !slices.Contains(g.o.Model.Providers, provider) {
		return session.Session{}, Provider{}, apierror.New(apierror.Forbidden, "The platform does not serve this model provider.")
	}
	return sess, p, nil
}

// Allow checks that the platform lets call's model through: any model of a
// provider RA_MODEL_ALLOWED does not name, else only those it lists.
func (g *Gateway) Allow(call Call) error {
	allowed, limited := g.o.Model.Allowed[call.Provider.Name]
	if limited && !slices.Contains(allowed, call.Model) {
		return apierror.New(apierror.Forbidden, "This model is not allowed on this platform.")
	}
	return nil
}

// Upstream is the base URL calls to p go to.
func (g *Gateway) Upstream(p Provider) string {
	if u := g.o.Model.Upstreams[p.Name]; u != "" {
		return u
	}
	if p.DefaultUpstream == "" && p.Auth.SigV4 {
		return "https://bedrock-runtime." + g.o.Region + ".amazonaws.com"
	}
	return strings.TrimRight(p.DefaultUpstream, "/")
}

// Key returns the platform's API key for p: model_unavailable when it holds
// none, service_unavailable when it cannot be read now.
func (g *Gateway) Key(ctx context.Context, p Provider) (string, error) {
	key, err := g.o.Keys.Key(ctx, p.Name)
	switch {
	case errors.Is(err, ErrNoKey):
		g.o.Log.WarnContext(ctx, "no API key for a model provider", slog.String("provider", p.Name))
		return "", apierror.New(apierror.ModelUnavailable, "The platform holds no API key for this model provider.")
	case err != nil:
		return "", err
	}
	return key, nil
}

// Record settles the call of hold h: what it used, costed by the price
// table, on sess's usage and its app's spend of the day and month, with
// what h held given back, in one write. It is called once the answer has
// ended; a failure is logged (with the numbers, to reconcile) and returned.
func (g *Gateway) Record(ctx context.Context, sess session.Session, call Call, h session.Hold, u session.Usage, reported bool) error {
	id, p := sess.ID, call.Provider
	if g.o.Prices != nil {
		u.CostMicroUSD = g.o.Prices.Cost(call.Model, u)
	}
	if u.CostMicroUSD > 0 {
		metrics.Emit(ctx, g.o.Log, sess.Tenant, []metrics.Value{{Name: metrics.ModelCostUSD, Value: float64(u.CostMicroUSD) / 1e6, Unit: "None"}},
			slog.String("session_id", id), slog.String("model", call.Model))
	}
	if !reported {
		g.o.Log.WarnContext(ctx, "model answer without usage", slog.String("session_id", id), slog.String("provider", p.Name))
	}
	if h.SessionID == "" {
		h = session.Hold{SessionID: id, Tenant: sess.Tenant, At: g.o.Now()}
	}
	if err := g.o.Store.Settle(ctx, h, u); err != nil {
		g.o.Log.ErrorContext(ctx, "record model usage", slog.String("session_id", id), slog.String("provider", p.Name),
			slog.Int64("input_tokens", u.InputTokens), slog.Int64("output_tokens", u.OutputTokens),
			slog.Int64("cached_tokens", u.CachedTokens), slog.Int64("cost_micro_usd", u.CostMicroUSD), slog.Int64("held_micro_usd", h.MicroUSD),
			slog.String("error", err.Error()))
		return err
	}
	g.budgetUsed(ctx, h)
	return nil
}

// budgetUsed reports how much of its day's and month's caps the app of
// settled hold h has used (the fullest), for the 80% and 100% alarms.
func (g *Gateway) budgetUsed(ctx context.Context, h session.Hold) {
	used := -1.0
	for _, c := range []struct {
		scope string
		limit int64
	}{{session.ScopeTenantDay, h.DayCap}, {session.ScopeTenantMonth, h.MonthCap}} {
		if c.limit <= 0 || h.Tenant == "" {
			continue
		}
		sp, err := g.o.Store.TenantSpend(ctx, h.Tenant, c.scope, h.At)
		if err != nil {
			g.o.Log.WarnContext(ctx, "read an app's spend", slog.String("error", err.Error()))
			return
		}
		used = max(used, 100*float64(sp.MicroUSD)/float64(c.limit))
	}
	if used >= 0 {
		metrics.Emit(ctx, g.o.Log, h.Tenant, []metrics.Value{{Name: metrics.BudgetUsedPercent, Value: used, Unit: "Percent"}})
	}
}

// rateLimitHeaders are the providers' request-budget headers: the limit
// and what remains of it (OpenAI and Mistral's; Anthropic's).
var rateLimitHeaders = [][2]string{
	{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests"},
	{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining"},
}

// RateLimited reports whether a provider's answer says its calls are
// limited (429) or nearly so (under a tenth of the request budget left).
// header reads the answer's headers (http.Header.Get).
func RateLimited(status int, header func(string) string) bool {
	if status == 429 { // Too Many Requests
		return true
	}
	for _, names := range rateLimitHeaders {
		limit, err1 := strconv.ParseFloat(header(names[0]), 64)
		left, err2 := strconv.ParseFloat(header(names[1]), 64)
		if err1 == nil && err2 == nil && limit > 0 && left < limit/10 {
			return true
		}
	}
	return false
}

// NoteRateLimit records on sess that a provider limited its calls now (a
// job's alerts show it); a failure is logged, the call goes on.
func (g *Gateway) NoteRateLimit(ctx context.Context, sess session.Session) {
	if _, err := g.o.Store.Touch(ctx, sess.ID, sess.Generation, session.Fields{RateLimitedAt: time.Now()}); err != nil {
		g.o.Log.WarnContext(ctx, "record a rate limit", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	}
}
