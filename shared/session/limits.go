package session

import (
	"time"

	"github.com/remote-agents/remote-agents/shared/registry"
)

// EffectiveLimits are the limits of sess: for each part, the lowest of the
// platform's (p), its agent type's and its app key's, as copied at create;
// zero where none bounds it. A sandbox of the sandbox API has no idle
// limit: it lives until its timeout (EndsAt), used or not, as E2B's do
// (its commands and files are not its agent's activity).
func EffectiveLimits(p registry.SessionLimits, sess Session) registry.SessionLimits {
	out := p
	for _, l := range []*registry.SessionLimits{typeLimits(sess), sess.AppLimits} {
		if l == nil {
			continue
		}
		out = registry.SessionLimits{
			MaxSessionSeconds:  lower(out.MaxSessionSeconds, l.MaxSessionSeconds),
			IdleTimeoutSeconds: lower(out.IdleTimeoutSeconds, l.IdleTimeoutSeconds),
			MaxTokens:          lower(out.MaxTokens, l.MaxTokens),
			MaxCostUSD:         lower(out.MaxCostUSD, l.MaxCostUSD),
		}
	}
	if sess.Sandbox != nil {
		out.IdleTimeoutSeconds = 0
	}
	return out
}

// typeLimits are the limits of sess's agent type, nil for none.
func typeLimits(sess Session) *registry.SessionLimits {
	if sess.Workspace == nil {
		return nil
	}
	return sess.Workspace.SessionLimits
}

// LowerCap is the lower of two caps, 0 being none (a platform's and an app
// key's: the lower holds).
func LowerCap(a, b float64) float64 { return lower(max(a, 0), max(b, 0)) }

// lower is the lower of two bounds, 0 being none.
func lower[T int | int64 | float64](a, b T) T {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// Remaining is what a session has left of its limits (nil: no bound), as
// alive shows it.
type Remaining struct {
	Seconds     *int64 `json:"seconds"`
	IdleSeconds *int64 `json:"idle_seconds"`
	Tokens      *int64 `json:"tokens"`
	// CostUSD is what its model calls may still cost.
	CostUSD *float64 `json:"cost_usd"`
}

// activeSince is when sess last did something: its last activity, else
// when it became ready, else when it was created.
func activeSince(sess Session) time.Time {
	last := sess.CreatedAt
	for _, t := range []time.Time{sess.ReadyAt, sess.LastActivityAt} {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// watched reports whether sess has an open event stream: a viewer is
// activity.
func watched(sess Session, now time.Time) bool {
	for _, exp := range sess.Streams {
		if exp.UnixMilli() > now.UnixMilli() {
			return true
		}
	}
	return false
}

// RemainingOf is what sess has left of l at now.
func RemainingOf(l registry.SessionLimits, sess Session, now time.Time) Remaining {
	var r Remaining
	if l.MaxSessionSeconds > 0 {
		v := max(0, int64(l.MaxSessionSeconds)-int64(now.Sub(sess.CreatedAt).Seconds()))
		r.Seconds = &v
	}
	if l.IdleTimeoutSeconds > 0 {
		v := int64(l.IdleTimeoutSeconds)
		if !watched(sess, now) {
			v = max(0, v-int64(now.Sub(activeSince(sess)).Seconds()))
		}
		r.IdleSeconds = &v
	}
	if l.MaxTokens > 0 {
		u := sess.Usage()
		v := max(0, l.MaxTokens-u.InputTokens-u.OutputTokens)
		r.Tokens = &v
	}
	if l.MaxCostUSD > 0 {
		v := max(0, l.MaxCostUSD-sess.Usage().CostUSD)
		r.CostUSD = &v
	}
	return r
}

// Expired reports whether sess, a sandbox of the sandbox API, has reached
// its end (EndsAt).
func (s Session) Expired(now time.Time) bool {
	return !s.EndsAt.IsZero() && !now.Before(s.EndsAt)
}

// PausesAtEnd reports whether sess pauses at its end (a sandbox created
// with AutoPause) rather than ending.
func PausesAtEnd(sess Session) bool {
	return sess.Sandbox != nil && sess.Sandbox.AutoPause && sess.JobID == ""
}

// running reports whether the limits apply in state s (up and usable: not
// provisioning, not already ending or over).
func running(s State) bool { return s == Ready || s == Working || s == Idle }

// OverLimit is the reason a running sess is to end for a limit at now, ""
// for none.
func OverLimit(l registry.SessionLimits, sess Session, now time.Time) Reason {
	if !running(sess.State) {
		return ""
	}
	if sess.Unclaimed(now) {
		return ReasonUnclaimed
	}
	if sess.Expired(now) {
		return ReasonTimeout
	}
	r := RemainingOf(l, sess, now)
	switch {
	case r.Seconds != nil && *r.Seconds == 0:
		return ReasonMaxDuration
	case r.Tokens != nil && *r.Tokens == 0:
		return ReasonTokenBudget
	case r.CostUSD != nil && *r.CostUSD == 0:
		return ReasonCostBudget
	case r.IdleSeconds != nil && *r.IdleSeconds == 0:
		return ReasonIdleTimeout
	}
	return ""
}
