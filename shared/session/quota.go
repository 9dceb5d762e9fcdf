package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Quotas bound what one app (tenant) may hold or open at once (see
// config.Quotas); a zero part is no bound.
type Quotas struct {
	ConcurrentSessions int
	CreatesPerMinute   int
	StreamsPerSession  int
	// Uploads bound the presigned upload URLs a session is granted.
	Uploads UploadQuota
	// DailyBudgetUSD bounds an app's model spend a UTC day: over it, create
	// is 429 budget_exceeded until the next day; MonthlyBudgetUSD a UTC
	// month (the model gateway holds its calls within both).
	DailyBudgetUSD, MonthlyBudgetUSD float64
}

// Quota timing.
const (
	// LiveQuotaRetry is what a create over the live sessions quota is told
	// to wait: sessions end in their own time.
	LiveQuotaRetry = 30
	// StreamQuotaRetry is what an event stream over its quota is told to
	// wait.
	StreamQuotaRetry = 5
	// StreamLapse is how long an open stream counts without saying it
	// closed (its function died): past the longest a stream runs.
	StreamLapse = 16 * time.Minute
)

// Admission is what a create must stay within, checked in the write that
// creates it (Store.Admit); a zero limit is none.
type Admission struct {
	// LiveLimit bounds the tenant's live sessions (concurrent_sessions).
	LiveLimit int
	// Minute is the clock minute of the create, and MinuteLimit how many
	// creates the tenant may make in it (creates_per_minute).
	Minute      time.Time
	MinuteLimit int
}

// The quotas an Admit can refuse, as QuotaError names them (and the 429's
// details.quota).
const (
	QuotaConcurrentSessions = "concurrent_sessions"
	QuotaCreatesPerMinute   = "creates_per_minute"
)

// QuotaError is the ErrOverQuota of an Admit: which quota was full.
type QuotaError struct{ Quota string }

func (e *QuotaError) Error() string { return "over the " + e.Quota + " quota" }

// Unwrap makes a QuotaError an ErrOverQuota.
func (e *QuotaError) Unwrap() error { return ErrOverQuota }

// checkBudget answers 429 budget_exceeded when app's tenant has spent its
// day's or its month's budget (the platform's and the app key's, the lower
// holding).
func (s *Creator) checkBudget(ctx context.Context, app registry.AppKey, now time.Time) error {
	for _, c := range []struct {
		scope string
		limit float64
	}{
		{ScopeTenantDay, lower(s.o.Quotas.DailyBudgetUSD, app.MaxCostUSDPerDay)},
		{ScopeTenantMonth, lower(s.o.Quotas.MonthlyBudgetUSD, app.MaxCostUSDPerMonth)},
	} {
		if c.limit <= 0 {
			continue
		}
		spent, err := s.o.Store.TenantSpend(ctx, app.Tenant, c.scope, now)
		if err != nil {
			return err
		}
		if float64(spent.MicroUSD)/1e6 >= c.limit {
			return BudgetExceeded(CapName(c.scope), c.limit, float64(spent.MicroUSD)/1e6, PeriodEnd(c.scope, now), now)
		}
	}
	return nil
}

// BudgetExceeded is the 429 budget_exceeded of a spend cap called name
// (max_cost_usd_per_day, max_cost_usd_per_month, max_cost_usd) of limit USD,
// spent USD spent: retryable once the period resets (never for zero
// resets).
func BudgetExceeded(name string, limit, spent float64, resets, now time.Time) *apierror.Error {
	e := &apierror.Error{Code: apierror.BudgetExceeded, Details: map[string]any{"budget": name, "limit_usd": limit, "spent_usd": spent}}
	switch name {
	case "max_cost_usd_per_day":
		e.Message = fmt.Sprintf("This app's model calls cost %.2f USD today, its daily budget of %.2f USD; create again tomorrow (UTC).", spent, limit)
	case "max_cost_usd_per_month":
		e.Message = fmt.Sprintf("This app's model calls cost %.2f USD this month, its monthly budget of %.2f USD; create again next month (UTC).", spent, limit)
	default:
		e.Message = fmt.Sprintf("This agent's model calls cost %.2f USD, its budget of %.2f USD.", spent, limit)
	}
	if !resets.IsZero() {
		e.RetryAfter = max(1, int(resets.Sub(now).Seconds()+0.999))
	}
	return e
}

// admission is what a create of now must stay within.
func (s *Creator) admission(now time.Time) Admission {
	q := s.o.Quotas
	return Admission{LiveLimit: q.ConcurrentSessions, Minute: now.Truncate(time.Minute), MinuteLimit: q.CreatesPerMinute}
}

// overQuota is the 429 of an Admit that err refused, nil for another error.
func (s *Creator) overQuota(err error, a Admission, now time.Time) *apierror.Error {
	var qe *QuotaError
	if !errors.As(err, &qe) {
		return nil
	}
	switch qe.Quota {
	case QuotaCreatesPerMinute:
		return &apierror.Error{Code: apierror.QuotaExceeded, RetryAfter: max(1, int(a.Minute.Add(time.Minute).Sub(now).Seconds()+0.999)),
			Details: map[string]any{"quota": QuotaCreatesPerMinute, "limit": a.MinuteLimit},
			Message: fmt.Sprintf("This app created %d agents this minute, its quota; retry in the next minute.", a.MinuteLimit)}
	default:
		return &apierror.Error{Code: apierror.QuotaExceeded, RetryAfter: LiveQuotaRetry, Details: map[string]any{"quota": QuotaConcurrentSessions, "limit": a.LiveLimit},
			Message: fmt.Sprintf("This app has %d live agents, its quota; shut one down or retry later.", a.LiveLimit)}
	}
}

// quotaExceeded records a create refused by quota q in tenant's app stream
// (quota.exceeded, what its webhooks deliver), once a minute for a quota:
// a client retrying in a loop makes one event. A failure to record is
// logged; the refusal stands either way.
func (s *Creator) quotaExceeded(ctx context.Context, tenant string, q *apierror.Error, now time.Time) {
	quota, _ := q.Details["quota"].(string)
	limit, _ := q.Details["limit"].(int)
	e, err := NewEvent(sandboxwire.QuotaExceeded{Quota: quota, Limit: limit, Message: q.Message})
	if err == nil {
		once := quota + "#" + now.UTC().Truncate(time.Minute).Format(time.RFC3339)
		_, _, err = s.o.Store.AppendAppEvent(ctx, tenant, once, e)
	}
	if err != nil && s.o.Log != nil {
		s.o.Log.WarnContext(ctx, "record quota.exceeded", slog.String("tenant", tenant), slog.String("error", err.Error()))
	}
}

// UploadQuota bounds the presigned upload URLs granted to one session over
// its life, and the bytes they may carry together (each URL counted at the
// size it was signed for, used or not); a zero part is no bound.
type UploadQuota struct {
	URLs  int
	Bytes int64
}

// GrantUploads counts urls more upload URLs of bytes in all against sess's
// quota q before they are signed, or answers 429 quota_exceeded.
func GrantUploads(ctx context.Context, store UploadGrants, q UploadQuota, sess Session, urls int, bytes int64) error {
	if q.URLs <= 0 && q.Bytes <= 0 {
		return nil
	}
	err := store.GrantUploads(ctx, sess.ID, urls, bytes, q)
	if !errors.Is(err, ErrConflict) {
		return err
	}
	// Which quota: as the session stands now (another grant may have
	// taken the rest since sess was read).
	if now, err := store.Get(ctx, sess.ID); err == nil {
		sess = now
	}
	if sess.State.Terminal() {
		return apierror.New(apierror.AgentNotAlive, "The agent is %s and takes no more files.", sess.State)
	}
	if q.URLs > 0 && sess.UploadURLs+int64(urls) > int64(q.URLs) {
		return &apierror.Error{Code: apierror.QuotaExceeded, Details: map[string]any{"quota": "uploads_per_session", "limit": q.URLs},
			Message: fmt.Sprintf("This agent was granted %d upload URLs, its quota.", sess.UploadURLs)}
	}
	gib := q.Bytes >> 30
	return &apierror.Error{Code: apierror.QuotaExceeded, Details: map[string]any{"quota": "upload_gib_per_session", "limit": gib},
		Message: fmt.Sprintf("This agent's uploads would pass %d GiB, its quota.", gib)}
}

// StreamsOptions configure a Streams.
type StreamsOptions struct {
	Store Store
	// Quotas bound the event streams a session may hold open at once
	// (StreamsPerSession; zero is no bound).
	Quotas Quotas
	Log    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Streams admits the event streams of a session's token holder.
type Streams struct {
	Access
	o StreamsOptions
}

// NewStreams returns streams with options o.
func NewStreams(o StreamsOptions) *Streams {
	o.Now, o.Log = clock(o.Now), logger(o.Log)
	return &Streams{Access: Access{Store: o.Store, Now: o.Now}, o: o}
}

// OpenStream admits one more event stream of sess, or answers 429
// quota_exceeded; close, called once the stream ends, forgets it.
func (s *Streams) OpenStream(ctx context.Context, sess Session) (close func(), err error) {
	n := s.o.Quotas.StreamsPerSession
	if n <= 0 || sess.State.Terminal() {
		return func() {}, nil // an agent that is over only replays what it said
	}
	id := uuid.NewString()
	now := s.o.Now()
	err = s.o.Store.OpenStream(ctx, sess.ID, id, now.Add(StreamLapse), now, n)
	if errors.Is(err, ErrConflict) {
		return nil, &apierror.Error{Code: apierror.QuotaExceeded, RetryAfter: StreamQuotaRetry, Details: map[string]any{"quota": "streams_per_session", "limit": n},
			Message: fmt.Sprintf("This agent has %d open event streams, its quota; close one or retry later.", n)}
	}
	if err != nil {
		return nil, err
	}
	return func() {
		if err := s.o.Store.CloseStream(context.WithoutCancel(ctx), sess.ID, id); err != nil {
			s.o.Log.WarnContext(ctx, "forget a closed event stream", "session_id", sess.ID, "error", err.Error())
		}
	}, nil
}
