package modelgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Waiting for a cap's rest: a call that finds it held by calls under way
// waits for them to settle, checking again from HoldRetry up to a second
// apart, for at most HoldWait; then it is refused, to be retried.
const (
	HoldWait  = 30 * time.Second
	HoldRetry = 50 * time.Millisecond
)

// endWriteLimit bounds the writes that end a session whose cap is spent
// (its change and its budget.exceeded event), once the call is refused.
const endWriteLimit = 10 * time.Second

// DefaultMaxOutput is the output a call that names no bound is held for.
const DefaultMaxOutput = 4096

// Caps are the platform's spend caps the gateway holds calls within, with
// each session's own and its app key's (the lower of each holding).
type Caps struct {
	// Limits are the platform's session limits (max_cost_usd, max_tokens).
	Limits registry.SessionLimits
	// DayUSD and MonthUSD bound each app's spend a UTC day and month.
	DayUSD, MonthUSD float64
}

// Admit holds the most call can cost against sess's caps before it starts:
// the session's own (cost and tokens), its app's day's and month's. A
// scope whose rest calls under way hold is waited for (HoldWait); one that
// has reached its cap refuses (429 budget_exceeded), and the session is
// told (budget.exceeded) and ends. The hold goes back with Record or
// Release.
func (g *Gateway) Admit(ctx context.Context, sess session.Session, call Call) (session.Hold, error) {
	now := g.o.Now()
	limits := session.EffectiveLimits(g.o.Caps.Limits, sess)
	// A job's tokenLimit holds at the gateway too, whatever its sandbox does.
	limits.MaxTokens = int64(session.LowerCap(float64(limits.MaxTokens), float64(sess.JobTokenLimit)))
	if used := sess.InputTokens + sess.OutputTokens; limits.MaxTokens > 0 && used >= limits.MaxTokens {
		return session.Hold{}, g.exceeded(ctx, sess, &session.BudgetError{Scope: session.ScopeSession, Exhausted: true}, &tokenBudget{limits.MaxTokens, used}, now)
	}
	caps := sess.AppCaps
	if caps == nil {
		caps = &registry.SpendCaps{}
	}
	h := session.Hold{SessionID: sess.ID, Tenant: sess.Tenant, At: now, MicroUSD: g.most(call),
		SessionCap: micro(limits.MaxCostUSD), DayCap: micro(session.LowerCap(g.o.Caps.DayUSD, caps.PerDayUSD)), MonthCap: micro(session.LowerCap(g.o.Caps.MonthUSD, caps.PerMonthUSD))}
	if !h.Capped() {
		return h, nil
	}
	wait := HoldRetry
	for {
		err := g.o.Store.Hold(ctx, h)
		var be *session.BudgetError
		switch {
		case !errors.As(err, &be):
			return h, err
		case be.Exhausted:
			return h, g.exceeded(ctx, sess, be, nil, now)
		case g.o.Now().Sub(now) >= HoldWait:
			return h, &apierror.Error{Code: apierror.BudgetExceeded, RetryAfter: 1, Details: map[string]any{"budget": session.CapName(be.Scope), "held": true},
				Message: "Model calls under way hold the rest of this budget; retry once they end."}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return h, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// Release gives back what h held for a call that used nothing (it failed,
// or its answer was an error).
func (g *Gateway) Release(ctx context.Context, h session.Hold) {
	if !h.Capped() {
		return
	}
	if err := g.o.Store.Settle(ctx, h, session.Usage{}); err != nil {
		g.o.Log.WarnContext(ctx, "release a model call's hold", slog.String("session_id", h.SessionID), slog.Int64("micro_usd", h.MicroUSD), slog.String("error", err.Error()))
	}
}

// tokenBudget is a session's token cap and what it used.
type tokenBudget struct{ limit, used int64 }

// exceeded tells sess that a cap stopped its model calls, once (an event,
// and the session ends: reason budget for its app's caps, cost_budget or
// token_budget for its own), and is the call's 429.
func (g *Gateway) exceeded(ctx context.Context, sess session.Session, be *session.BudgetError, tokens *tokenBudget, now time.Time) error {
	resets := session.PeriodEnd(be.Scope, now)
	ev := sandboxwire.BudgetExceeded{Scope: be.Scope, Unit: "usd", Limit: float64(be.CapMicroUSD) / 1e6, Spent: float64(be.SpentMicroUSD) / 1e6, ResetsAt: resets}
	reason := session.ReasonBudget
	answer := session.BudgetExceeded(session.CapName(be.Scope), ev.Limit, ev.Spent, resets, now)
	switch {
	case tokens != nil:
		ev.Unit, ev.Limit, ev.Spent, reason = "tokens", float64(tokens.limit), float64(tokens.used), session.ReasonTokenBudget
		ev.Message = fmt.Sprintf("This agent used %d model tokens, its budget of %d: it stops here.", tokens.used, tokens.limit)
		answer = &apierror.Error{Code: apierror.BudgetExceeded, Details: map[string]any{"budget": "max_tokens", "limit": tokens.limit, "used": tokens.used}, Message: ev.Message}
	case be.Scope == session.ScopeSession:
		reason = session.ReasonCostBudget
		ev.Message = fmt.Sprintf("This agent's model calls cost %.4f USD, its budget of %.4f USD: it stops here.", ev.Spent, ev.Limit)
	default:
		period := map[string]string{session.ScopeTenantDay: "today", session.ScopeTenantMonth: "this month"}[be.Scope]
		ev.Message = fmt.Sprintf("This app's model calls cost %.4f USD %s (UTC), its budget of %.4f USD: its agents stop until %s.", ev.Spent, period, ev.Limit, resets.Format(time.RFC3339))
	}
	if slices.Contains(session.Running, sess.State) {
		// The end and its event are written whatever the caller does: a
		// sandbox that gave up on its call is still told, and still ends.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endWriteLimit)
		defer cancel()
		_, err := g.o.Store.Transition(ctx, sess.ID, session.Change{From: session.Running, To: session.Ending, Generation: sess.Generation, Reason: reason})
		if err == nil {
			if err := g.tell(ctx, sess, ev); err != nil {
				g.o.Log.WarnContext(ctx, "tell an agent its budget is spent", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
			}
		} else if !errors.Is(err, session.ErrConflict) {
			g.o.Log.WarnContext(ctx, "end an agent whose budget is spent", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
		}
	}
	g.o.Log.InfoContext(ctx, "model call refused: budget", slog.String("session_id", sess.ID), slog.String("scope", be.Scope), slog.String("unit", ev.Unit),
		slog.Float64("limit", ev.Limit), slog.Float64("spent", ev.Spent))
	return answer
}

// tell appends ev to sess's events.
func (g *Gateway) tell(ctx context.Context, sess session.Session, ev sandboxwire.BudgetExceeded) error {
	raw, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		return err
	}
	_, err = g.o.Store.AppendEvents(ctx, sess.ID, sess.Generation, []session.Event{{Type: ev.EventType(), Data: data, At: g.o.Now().UTC()}})
	return err
}

// most is the most call can cost, in micro-USD, by the price table: its
// body's bytes as input tokens (a token is at least a byte) and the output
// it bounds (DefaultMaxOutput when it names none); 0 for an unlisted model.
func (g *Gateway) most(call Call) int64 {
	if g.o.Prices == nil {
		return 0
	}
	return g.o.Prices.Cost(call.Model, session.Usage{InputTokens: int64(len(call.Body)), OutputTokens: maxOutput(call.Body)})
}

// maxOutput is the output bound a call's body names: max_tokens (Anthropic,
// OpenAI's older), max_completion_tokens, max_output_tokens (OpenAI),
// generationConfig.maxOutputTokens (Gemini), inferenceConfig.maxTokens
// (Bedrock's Converse); DefaultMaxOutput when none.
func maxOutput(body []byte) int64 {
	var b struct {
		MaxTokens           int64 `json:"max_tokens"`
		MaxCompletionTokens int64 `json:"max_completion_tokens"`
		MaxOutputTokens     int64 `json:"max_output_tokens"`
		Generation          struct {
			MaxOutputTokens int64 `json:"maxOutputTokens"`
		} `json:"generationConfig"`
		Inference struct {
			MaxTokens int64 `json:"maxTokens"`
		} `json:"inferenceConfig"`
	}
	_ = json.Unmarshal(body, &b)
	if n := max(b.MaxTokens, b.MaxCompletionTokens, b.MaxOutputTokens, b.Generation.MaxOutputTokens, b.Inference.MaxTokens); n > 0 {
		return n
	}
	return DefaultMaxOutput
}

// micro is usd in micro-USD.
func micro(usd float64) int64 { return int64(usd*1e6 + 0.5) }
