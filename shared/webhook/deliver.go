package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Delivery's pace.
const (
	// Lease is how long one delivery run holds a cursor: longer than
	// DrainBudget and an attempt.
	Lease = 2 * time.Minute
	// DrainBudget bounds one run's sending, over all the endpoints of the
	// agent's app; the rest is re-triggered. A run takes at most this and
	// one attempt (RunLimit).
	DrainBudget = time.Minute
	// RunLimit is the most one run takes: a handler whose time left is
	// shorter leaves the trigger for another invocation.
	RunLimit = DrainBudget + Timeout + 5*time.Second
	// MaxPerDrain bounds the events one run reads and sends.
	MaxPerDrain = 100
	// BusyRetry is when a trigger that found its cursor held by another run
	// is tried again (that run may have read before the newest event).
	BusyRetry = 2 * time.Second
	// MaxQueueDelay is SQS's longest delay: a longer wait is re-checked.
	MaxQueueDelay = 15 * time.Minute
)

// Trigger is a message of the webhooks queue: an agent's stream grew (live
// delivery to every endpoint of its app), or a replay of it to one
// endpoint.
type Trigger struct {
	Agent string `json:"agent_id"`
	// Replay, when set, re-sends Agent's events From..Until to Endpoint
	// of Tenant, leaving the live cursor alone.
	Replay *Replay `json:"replay,omitempty"`
}

// Replay is a replay's progress, carried by its trigger.
type Replay struct {
	Tenant   string `json:"tenant"`
	Endpoint string `json:"endpoint_id"`
	From     int64  `json:"from"`
	Until    int64  `json:"until"`
	// Since, if set, leaves out events from before it.
	Since time.Time `json:"since,omitzero"`
	// Attempts and FirstFailedAt are about event From while retried;
	// StartedAt names its log entry.
	Attempts      int       `json:"attempts,omitempty"`
	FirstFailedAt time.Time `json:"first_failed_at,omitzero"`
	StartedAt     time.Time `json:"started_at,omitzero"`
}

// Streams reads agents' sessions and events (session.Store's roles).
type Streams interface {
	Get(ctx context.Context, id string) (session.Session, error)
	Events(ctx context.Context, id string, after int64, limit int) ([]session.Event, error)
}

// Deliverer sends what each endpoint has not taken yet.
type Deliverer struct {
	Store   Store
	Streams Streams
	// Queue carries triggers (re-sent with a delay to retry later); DLQ
	// gets the events that failed for RetryFor.
	Queue, DLQ queue.Queue
	// Client sends (Addresses.Client: checked at every dial).
	Client *http.Client
	Log    *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	// Holder names this process's runs on cursors; "" is random. Each run
	// holds a cursor under its own name: Holder and a number.
	Holder string

	once sync.Once
	runs atomic.Uint64
	mu   sync.Mutex
	// tenants are the agents' apps ("" for a stream recorded for no app),
	// at most maxTenants, forgotten all at once past that.
	tenants map[string]string
}

// maxTenants bounds the agents whose app a Deliverer remembers.
const maxTenants = 10000

func (d *Deliverer) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// run names one delivery run: no two runs, of this process or another,
// hold a cursor at once.
func (d *Deliverer) run() string {
	d.once.Do(func() {
		if d.Holder == "" {
			d.Holder = "run_" + strconv.FormatUint(rand.Uint64(), 36) //nolint:gosec // a name, not a secret
		}
	})
	return d.Holder + "_" + strconv.FormatUint(d.runs.Add(1), 10)
}

// Handle handles one message of the webhooks queue; an error leaves it on
// the queue to be handled again.
func (d *Deliverer) Handle(ctx context.Context, body string) error {
	var t Trigger
	if err := json.Unmarshal([]byte(body), &t); err != nil || t.Agent == "" {
		d.Log.WarnContext(ctx, "webhooks: dropping a malformed trigger", slog.Int("bytes", len(body)))
		return nil
	}
	if t.Replay != nil {
		return d.replay(ctx, t)
	}
	return d.Deliver(ctx, t.Agent)
}

// Deliver sends agent's new events to every endpoint of its app.
func (d *Deliverer) Deliver(ctx context.Context, agent string) error {
	tenant, err := d.tenant(ctx, agent)
	if err != nil || tenant == "" {
		return err
	}
	eps, err := d.Store.Endpoints(ctx, tenant)
	if err != nil {
		return err
	}
	var again time.Time
	began := d.now()
	for _, ep := range eps {
		if ep.Disabled {
			continue
		}
		if d.now().Sub(began) > DrainBudget {
			again = d.now() // the rest in a run of its own
			break
		}
		at, err := d.drain(ctx, ep, agent, began)
		if err != nil {
			return err
		}
		if !at.IsZero() && (again.IsZero() || at.Before(again)) {
			again = at
		}
	}
	if again.IsZero() {
		return nil
	}
	return d.retrigger(ctx, Trigger{Agent: agent}, again.Sub(d.now()))
}

// tenant is agent's app, "" when its life is not recorded for one.
func (d *Deliverer) tenant(ctx context.Context, agent string) (string, error) {
	if t, ok := session.AppOf(agent); ok {
		return t, nil
	}
	d.mu.Lock()
	t, ok := d.tenants[agent]
	d.mu.Unlock()
	if ok {
		return t, nil
	}
	s, err := d.Streams.Get(ctx, agent)
	if errors.Is(err, session.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if session.Recorded(s) {
		t = s.Tenant
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tenants == nil || len(d.tenants) >= maxTenants {
		d.tenants = map[string]string{}
	}
	d.tenants[agent] = t
	return t, nil
}

// drain sends ep what it has not taken of agent's stream, in order, from
// its cursor; it answers when to run again (zero: not needed).
func (d *Deliverer) drain(ctx context.Context, ep Endpoint, agent string, began time.Time) (time.Time, error) {
	now := d.now()
	c, ok, err := d.Store.Claim(ctx, ep.ID, agent, d.run(), now, now.Add(Lease))
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		return now.Add(BusyRetry), nil
	}
	again, err := d.send(ctx, ep, agent, &c, began)
	if _, rerr := d.Store.Release(context.WithoutCancel(ctx), c); rerr != nil && err == nil {
		err = rerr
	}
	return again, err
}

func (d *Deliverer) send(ctx context.Context, ep Endpoint, agent string, c *Cursor, began time.Time) (time.Time, error) {
	if c.NextAt.After(d.now()) {
		return c.NextAt, nil
	}
	evs, err := d.Streams.Events(ctx, agent, c.After, MaxPerDrain)
	if err != nil {
		return time.Time{}, err
	}
	ready := session.Contiguous(evs, c.After, d.now())
	for _, e := range ready {
		msg, ok, err := FromEvent(agent, e)
		if err != nil {
			return time.Time{}, err
		}
		if !ok || !ep.Wants(msg.Type) || e.At.Before(ep.CreatedAt) {
			c.After = e.Seq // not this endpoint's
			continue
		}
		now := d.now()
		if now.Sub(began) > DrainBudget {
			return now, nil
		}
		if c.FirstAttemptAt.IsZero() {
			c.FirstAttemptAt = now
		}
		c.Attempts++
		res := d.attempt(ctx, ep, msg)
		entry := Delivery{Endpoint: ep.ID, Key: logKey(c.FirstAttemptAt, msg.ID, false), MessageID: msg.ID, Type: msg.Type,
			AgentID: agentOf(agent), Sequence: e.Seq, Attempts: c.Attempts, ResponseCode: res.code, Error: res.err,
			LatencyMS: res.latency.Milliseconds(), CreatedAt: c.FirstAttemptAt, UpdatedAt: d.now()}
		switch {
		case res.ok():
			entry.Status = StatusDelivered
		case res.code == http.StatusGone:
			entry.Status = StatusEndpointDisabled
		default:
			if c.FirstFailedAt.IsZero() {
				c.FirstFailedAt = now
			}
			if now.Sub(c.FirstFailedAt) < RetryFor {
				c.NextAt = now.Add(Backoff(c.Attempts))
				entry.Status, entry.NextAttemptAt = StatusRetrying, &c.NextAt
				if err := d.Store.LogDelivery(ctx, entry); err != nil {
					return time.Time{}, err
				}
				return c.NextAt, nil
			}
			entry.Status = StatusDeadLettered
			if err := d.deadLetter(ctx, ep, msg, entry); err != nil {
				return time.Time{}, err
			}
		}
		if err := d.Store.LogDelivery(ctx, entry); err != nil {
			return time.Time{}, err
		}
		if entry.Status == StatusEndpointDisabled {
			return time.Time{}, d.disable(ctx, ep, "the endpoint answered 410 Gone")
		}
		c.After, c.Attempts, c.FirstAttemptAt, c.FirstFailedAt, c.NextAt = e.Seq, 0, time.Time{}, time.Time{}, time.Time{}
	}
	switch {
	case len(evs) == MaxPerDrain && len(ready) == len(evs):
		return d.now(), nil // more are waiting
	case len(ready) < len(evs):
		// A number not yet written: its append is under way, or failed
		// (skipped after GapGrace).
		return d.now().Add(session.GapGrace), nil
	}
	return time.Time{}, nil
}

// agentOf is the agent whose stream stream is, "" for an app's own.
func agentOf(stream string) string {
	if _, app := session.AppOf(stream); app {
		return ""
	}
	return stream
}

// Backoff is the wait before retry n (from 1): FirstRetry doubling up to
// MaxRetryWait, jittered to between half and all of it.
func Backoff(n int) time.Duration {
	w := FirstRetry << min(max(n-1, 0), 20)
	if w > MaxRetryWait || w <= 0 {
		w = MaxRetryWait
	}
	return w/2 + time.Duration(rand.Int64N(int64(w/2)+1)) //nolint:gosec // jitter, not a secret
}

// logKey orders the log: newest first by when a message's first attempt
// was, then by its id.
func logKey(first time.Time, id string, replay bool) string {
	k := fmt.Sprintf("%013d#%s", first.UnixMilli(), id)
	if replay {
		k += "#replay"
	}
	return k
}

// result is one attempt's outcome.
type result struct {
	code    int
	err     string
	latency time.Duration
}

func (r result) ok() bool { return r.code >= 200 && r.code < 300 }

// attempt posts msg to ep once, signed, within Timeout.
func (d *Deliverer) attempt(ctx context.Context, ep Endpoint, msg Message) result {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	now := d.now()
	sig, err := Sign(ep.Secrets(now), msg.ID, now, msg.Body)
	if err != nil {
		return result{err: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(msg.Body))
	if err != nil {
		return result{err: "bad url"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "remote-agents-webhooks/1")
	req.Header.Set("webhook-id", msg.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	start := time.Now()
	resp, err := d.Client.Do(req)
	latency := time.Since(start)
	if err != nil {
		return result{err: attemptError(err), latency: latency}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return result{code: resp.StatusCode, latency: latency}
}

// attemptError says why an attempt got no answer, without the URL.
func attemptError(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			err = inner
		}
	}
	var ne interface{ Timeout() bool }
	switch {
	case errors.Is(err, ErrAddress):
		return "address not allowed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// deadLetter puts a message that failed for RetryFor on the DLQ.
func (d *Deliverer) deadLetter(ctx context.Context, ep Endpoint, msg Message, entry Delivery) error {
	body, err := json.Marshal(map[string]any{"endpoint_id": ep.ID, "tenant": ep.Tenant, "webhook_id": msg.ID,
		"type": msg.Type, "agent_id": entry.AgentID, "sequence": msg.Seq, "attempts": entry.Attempts,
		"last_response_code": entry.ResponseCode, "last_error": entry.Error})
	if err != nil {
		return err
	}
	if d.DLQ == nil {
		return errors.New("webhooks: no dead-letter queue")
	}
	_, err = d.DLQ.Send(ctx, string(body), 0)
	return err
}

// disable turns ep off (its receiver said it is gone).
func (d *Deliverer) disable(ctx context.Context, ep Endpoint, why string) error {
	cur, err := d.Store.Endpoint(ctx, ep.Tenant, ep.ID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	cur.Disabled, cur.DisabledReason, cur.UpdatedAt = true, why, d.now().UTC()
	d.Log.InfoContext(ctx, "webhooks: endpoint disabled", slog.String("endpoint_id", ep.ID), slog.String("reason", why))
	if err := d.Store.PutEndpoint(ctx, cur); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// retrigger puts t back on the queue to run after wait (at most
// MaxQueueDelay: a longer wait is checked then, and found not yet due).
func (d *Deliverer) retrigger(ctx context.Context, t Trigger, wait time.Duration) error {
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = d.Queue.Send(ctx, string(raw), min(max(wait, 0), MaxQueueDelay))
	return err
}

// replay re-sends one page of a replay and queues the rest.
func (d *Deliverer) replay(ctx context.Context, t Trigger) error {
	r := *t.Replay
	ep, err := d.Store.Endpoint(ctx, r.Tenant, r.Endpoint)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if ep.Disabled {
		return nil
	}
	began := d.now()
	if r.StartedAt.IsZero() {
		r.StartedAt = began
	}
	evs, err := d.Streams.Events(ctx, t.Agent, r.From-1, MaxPerDrain)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.Seq > r.Until {
			return nil
		}
		msg, ok, err := FromEvent(t.Agent, e)
		if err != nil {
			return err
		}
		if !ok || !ep.Wants(msg.Type) || e.At.Before(r.Since) {
			r.From = e.Seq + 1
			continue
		}
		now := d.now()
		if now.Sub(began) > DrainBudget {
			break
		}
		r.Attempts++
		res := d.attempt(ctx, ep, msg)
		entry := Delivery{Endpoint: ep.ID, Key: logKey(r.StartedAt, msg.ID, true), MessageID: msg.ID, Type: msg.Type,
			AgentID: agentOf(t.Agent), Sequence: e.Seq, Replay: true, Attempts: r.Attempts, ResponseCode: res.code, Error: res.err,
			LatencyMS: res.latency.Milliseconds(), CreatedAt: r.StartedAt, UpdatedAt: d.now()}
		switch {
		case res.ok():
			entry.Status = StatusDelivered
		case res.code == http.StatusGone:
			entry.Status = StatusEndpointDisabled
			if err := d.Store.LogDelivery(ctx, entry); err != nil {
				return err
			}
			return d.disable(ctx, ep, "the endpoint answered 410 Gone")
		default:
			if r.FirstFailedAt.IsZero() {
				r.FirstFailedAt = now
			}
			if now.Sub(r.FirstFailedAt) < RetryFor {
				next := now.Add(Backoff(r.Attempts))
				entry.Status, entry.NextAttemptAt = StatusRetrying, &next
				if err := d.Store.LogDelivery(ctx, entry); err != nil {
					return err
				}
				t.Replay = &r
				return d.retrigger(ctx, t, next.Sub(now))
			}
			entry.Status = StatusDeadLettered
			if err := d.deadLetter(ctx, ep, msg, entry); err != nil {
				return err
			}
		}
		if err := d.Store.LogDelivery(ctx, entry); err != nil {
			return err
		}
		r.From, r.Attempts, r.FirstFailedAt, r.StartedAt = e.Seq+1, 0, time.Time{}, d.now()
	}
	if len(evs) == 0 || r.From > r.Until {
		return nil
	}
	t.Replay = &r
	return d.retrigger(ctx, t, 0)
}

// Announce puts one trigger on q for each agent among written (events as
// the events table's stream shows them: session and type) that has an
// event to deliver.
func Announce(ctx context.Context, q queue.Queue, written []session.Event) error {
	var entries []queue.Entry
	seen := map[string]bool{}
	for _, e := range written {
		if e.SessionID == "" || seen[e.SessionID] {
			continue
		}
		if _, ok := TypeOf(e.Type); !ok {
			continue
		}
		seen[e.SessionID] = true
		raw, err := json.Marshal(Trigger{Agent: e.SessionID})
		if err != nil {
			return err
		}
		entries = append(entries, queue.Entry{ID: strconv.Itoa(len(entries)), Body: string(raw)})
	}
	if len(entries) == 0 {
		return nil
	}
	failed, err := q.SendBatch(ctx, entries)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("webhooks: %d of %d triggers not sent: %s", len(failed), len(entries), failed[0].Message)
	}
	return nil
}
