package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Sessions implements every role of the session store.
var (
	_ session.Lifecycle       = (*Sessions)(nil)
	_ session.Launches        = (*Sessions)(nil)
	_ session.EventLog        = (*Sessions)(nil)
	_ session.Metering        = (*Sessions)(nil)
	_ session.QuotaCounts     = (*Sessions)(nil)
	_ session.Fleet           = (*Sessions)(nil)
	_ session.PushConnections = (*Sessions)(nil)
	_ session.Store           = (*Sessions)(nil)
)

// Sessions stores sessions in the sessions table and their create idempotency
// records in the idempotency table.
type Sessions struct {
	// OnEnd, if set, hears each session that a transition ended (or
	// failed), as it is after (the platform's metrics).
	OnEnd func(ctx context.Context, s session.Session)
	// OnAppend, if set, hears the events appended to a session that has
	// viewers, once they are stored, with its viewers as the append left
	// them (the item the append updated holds them): it pushes them.
	OnAppend func(ctx context.Context, id string, viewers []string, events []session.Event)

	api         API
	sessions    *Table
	idempotency *Table
	events      *Table
	now         func() time.Time
}

// NewSessions returns the session store over its three tables.
func NewSessions(api API, sessionsTable, idempotencyTable, eventsTable string) *Sessions {
	return &Sessions{
		api:         api,
		sessions:    NewTable(api, sessionsTable),
		idempotency: NewTable(api, idempotencyTable),
		events:      NewTable(api, eventsTable),
		now:         time.Now,
	}
}

type sessionKey struct {
	ID string `json:"session_id"`
}

// Create writes the session and, if rec is set, its idempotency record,
// atomically; a live session of a tenant takes a live slot (Admit).
func (s *Sessions) Create(ctx context.Context, sess session.Session, rec *session.IdempotencyRecord) error {
	return s.Admit(ctx, sess, rec, session.Admission{})
}

// Admit writes the session, its idempotency record if rec is set, and its
// quotas' counters in one transaction: a live session of a tenant adds one
// to the tenant's live counter (conditional on a.LiveLimit), and a create
// within a minute limit to the minute's counter. A session that counts
// nothing is a plain conditional put (a transaction costs twice the writes).
//
// An app's agent's stream starts with agent.created (session.CreatedEvent),
// sequence number 1, taken by the session as it is written: in the same
// transaction, or just after a session written alone.
func (s *Sessions) Admit(ctx context.Context, sess session.Session, rec *session.IdempotencyRecord, a session.Admission) error {
	var created *session.Event
	if e, ok := session.CreatedEvent(sess, sess.CreatedAt); ok {
		sess.LastSeq, e.Seq = 1, 1
		e.ExpiresAt = s.now().Add(session.Retention + 24*time.Hour).Unix()
		created = &e
	}
	inTx, err := s.admit(ctx, sess, rec, a, created)
	if err != nil || created == nil || inTx {
		return err
	}
	if err := s.events.Put(ctx, *created, expression.AttributeNotExists(expression.Name("seq"))); err != nil {
		return fmt.Errorf("record the create of %s: %w", sess.ID, err)
	}
	return nil
}

// admit writes the session, and created in the same transaction when it
// takes one (inTx; a session alone is one conditional put, and its caller
// writes created after it).
func (s *Sessions) admit(ctx context.Context, sess session.Session, rec *session.IdempotencyRecord, a session.Admission, created *session.Event) (inTx bool, err error) {
	it := newSessionItem(sess)
	isNew := expression.AttributeNotExists(expression.Name("session_id"))
	ops := []TxOp{s.sessions.PutOp(it, isNew)}
	quotas := map[int]string{}
	recAt := -1
	if rec != nil {
		recAt = len(ops)
		ops = append(ops, s.idempotency.PutOp(rec, expression.AttributeNotExists(expression.Name("key"))))
	}
	now := s.now()
	if it.LiveTenant != "" {
		quotas[len(ops)] = session.QuotaConcurrentSessions
		ops = append(ops, s.idempotency.UpdateOp(liveKey(it.LiveTenant), countBy(1, now), under(a.LiveLimit)...))
	}
	if a.MinuteLimit > 0 && sess.Tenant != "" {
		quotas[len(ops)] = session.QuotaCreatesPerMinute
		up := expression.Add(expression.Name("n"), expression.Value(1)).
			Set(expression.Name("expires_at"), expression.Value(a.Minute.Add(2*time.Minute).Unix()))
		ops = append(ops, s.idempotency.UpdateOp(minuteKey(sess.Tenant, a.Minute), up, under(a.MinuteLimit)...))
	}
	if len(ops) == 1 {
		if err := s.sessions.Put(ctx, it, isNew); err != nil {
			return false, fmt.Errorf("create session %s: %w", sess.ID, err)
		}
		return false, nil
	}
	if created != nil {
		ops = append(ops, s.events.PutOp(*created, expression.AttributeNotExists(expression.Name("seq"))))
	}
	err = Transact(ctx, s.api, "", ops...)
	var canceled *TxCanceledError
	if errors.As(err, &canceled) {
		failed := func(i int) bool {
			return i >= 0 && i < len(canceled.Reasons) && canceled.Reasons[i] == "ConditionalCheckFailed"
		}
		if failed(recAt) {
			return false, fmt.Errorf("create session %s: %w", sess.ID, session.ErrIdempotencyTaken)
		}
		for i, q := range quotas {
			if failed(i) {
				return false, fmt.Errorf("create session %s: %w", sess.ID, &session.QuotaError{Quota: q})
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	return true, nil
}

// Get reads a session.
func (s *Sessions) Get(ctx context.Context, id string) (session.Session, error) {
	var it sessionItem
	err := s.sessions.Get(ctx, sessionKey{id}, &it)
	if errors.Is(err, ErrNotFound) {
		return session.Session{}, fmt.Errorf("session %s: %w", id, session.ErrNotFound)
	}
	return it.session(), err
}

// Idempotency reads an idempotency record.
func (s *Sessions) Idempotency(ctx context.Context, key string) (session.IdempotencyRecord, error) {
	var out session.IdempotencyRecord
	err := s.idempotency.Get(ctx, map[string]string{"key": key}, &out)
	if errors.Is(err, ErrNotFound) {
		return out, fmt.Errorf("idempotency record: %w", session.ErrNotFound)
	}
	return out, err
}

// Remember writes an idempotency record unless its key is used.
func (s *Sessions) Remember(ctx context.Context, rec session.IdempotencyRecord) error {
	err := s.idempotency.Put(ctx, rec, expression.AttributeNotExists(expression.Name("key")))
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("remember %s: %w", rec.Key, session.ErrIdempotencyTaken)
	}
	return err
}

// Transition moves a session from one of c.From to c.To. A session that
// ends gives its tenant's live slot back in the same transaction. A change
// its stream records (session.RecordsChange) takes the event's sequence
// number in the same write (ADD event_seq) and then writes the event; the
// counter stops at an end, so a reader of an ended session finds every
// event up to its LastSeq.
func (s *Sessions) Transition(ctx context.Context, id string, c session.Change) (session.Session, error) {
	now := s.now().UTC()
	// build makes the update and its condition afresh (a builder's copies
	// share their operations: a retry must not add to the last try's).
	build := func() (expression.UpdateBuilder, expression.ConditionBuilder) {
		up := expression.Set(expression.Name("state"), expression.Value(c.To)).
			Set(expression.Name("updated_at"), expression.Value(now.Format(time.RFC3339Nano)))
		if c.Reason != "" {
			up = up.Set(expression.Name("reason"), expression.Value(c.Reason))
		}
		up = setFields(up, c.Set)
		switch {
		case c.To.Terminal():
			up = up.Set(expression.Name("ended_at"), expression.Value(now.Format(time.RFC3339Nano))).
				Set(expression.Name("expires_at"), expression.Value(now.Add(session.Retention).Unix())).
				Remove(expression.Name("watch_shard")).Remove(expression.Name("due_at")).
				Remove(expression.Name("live_tenant")).Remove(expression.Name("streams"))
		case c.To == session.Ending:
			up = up.Set(expression.Name("due_at"), expression.Value(now.Add(session.EndingLimit).UnixMilli()))
		case c.To == session.Pausing:
			up = up.Set(expression.Name("due_at"), expression.Value(now.Add(session.PausingLimit).UnixMilli()))
		case c.To == session.Paused:
			up = up.Remove(expression.Name("due_at")) // no sandbox to show life
		case c.To == session.Resuming:
			// A new launch: the next generation, nothing of the last one's.
			up = up.Add(expression.Name("generation"), expression.Value(1)).
				Set(expression.Name("due_at"), expression.Value(now.Add(session.ProvisioningLimit).UnixMilli()))
			for _, name := range []string{"sandbox_ref", "sandbox_token_hash", "push_connection_id", "bootstrap_code_hash", "bootstrap_expires", "launch_lease", "heartbeat_at", "pool_sandbox"} {
				up = up.Remove(expression.Name(name))
			}
		default:
			up = setDue(up, c.Set)
		}
		cond := inStates(c.From)
		if c.Generation != 0 {
			cond = cond.And(expression.Name("generation").Equal(expression.Value(c.Generation)))
		}
		return up, cond
	}
	var after session.Session
	var recorded bool
	var err error
	switch {
	case c.To == session.Ready:
		after, recorded, err = s.ready(ctx, id, build)
	case c.To.Terminal(), c.To == session.Pausing, c.To == session.Paused, c.To == session.Resuming:
		after, recorded, err = s.recordedChange(ctx, id, c, build, 3)
	default:
		up, cond := build()
		return s.update(ctx, id, up, cond)
	}
	if err != nil {
		return session.Session{}, err
	}
	if e, ok := session.LifeEvent(after, now); ok && recorded {
		// The number is the change's (the counter stopped at an end; a
		// later append to a ready session takes the next): a failure here
		// leaves a gap readers skip after session.GapGrace.
		e.Seq = after.LastSeq
		e.ExpiresAt = now.Add(session.Retention + 24*time.Hour).Unix()
		// The change is made: its event is written whatever the caller's
		// deadline (a request that ran out of time), within a bound.
		put, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventWriteLimit)
		defer cancel()
		if err := s.events.Put(put, e, expression.AttributeNotExists(expression.Name("seq"))); err != nil {
			return session.Session{}, fmt.Errorf("record %s of %s: %w", e.Type, id, err)
		}
		if s.OnAppend != nil && len(after.Viewers) > 0 {
			s.OnAppend(put, id, after.Viewers, []session.Event{e})
		}
	}
	if c.To.Terminal() && s.OnEnd != nil {
		s.OnEnd(ctx, after)
	}
	return after, nil
}

// eventWriteLimit bounds the write of a change's lifecycle event, once the
// change is made.
const eventWriteLimit = 10 * time.Second

// ready applies a change into ready in one update where its stream records
// it (an app's agent ready for the first time, as session.RecordsChange
// says: the update's conditions say so, and it takes agent.ready's
// number); where the conditions fail, as a plain change (a job's sandbox,
// a repeated report, or a conflict, which the plain change finds again).
func (s *Sessions) ready(ctx context.Context, id string, build func() (expression.UpdateBuilder, expression.ConditionBuilder)) (session.Session, bool, error) {
	up, cond := build()
	up = up.Add(expression.Name("event_seq"), expression.Value(1))
	// Ready for the first time: provisioning, or a fork resuming from its
	// source's checkpoint, never ready yet (session.RecordsChange).
	first := expression.Name("state").Equal(expression.Value(session.Provisioning)).
		Or(expression.Name("state").Equal(expression.Value(session.Resuming)).And(expression.AttributeNotExists(expression.Name("ready_at"))))
	cond = cond.And(first).
		And(expression.AttributeExists(expression.Name("tenant"))).
		And(expression.AttributeNotExists(expression.Name("job_id")))
	after, err := s.update(ctx, id, up, cond)
	if !errors.Is(err, session.ErrConflict) {
		return after, err == nil, err
	}
	up, cond = build()
	after, err = s.update(ctx, id, up, cond)
	return after, false, err
}

// recordedChange applies an end, read first: the change takes its
// lifecycle event's number (ADD event_seq) when its stream records it, with
// the state it was read in pinned; a session holding a live slot gives it
// back in the same transaction. It answers the session after, and whether
// its LastSeq is the event's number. A session that moved between the read
// and the write is read again, up to tries times in all.
func (s *Sessions) recordedChange(ctx context.Context, id string, c session.Change, build func() (expression.UpdateBuilder, expression.ConditionBuilder), tries int) (after session.Session, recorded bool, err error) {
	var it sessionItem
	err = s.sessions.Get(ctx, sessionKey{id}, &it)
	if errors.Is(err, ErrNotFound) {
		return session.Session{}, false, fmt.Errorf("session %s: %w", id, session.ErrNotFound)
	}
	if err != nil {
		return session.Session{}, false, err
	}
	up, cond := build()
	before := it.session()
	record := session.Recorded(before) && session.RecordsChange(before, c.To)
	if record {
		up = up.Add(expression.Name("event_seq"), expression.Value(1))
		cond = cond.And(expression.Name("state").Equal(expression.Value(it.State)))
	}
	if it.LiveTenant == "" || !c.To.Terminal() {
		after, err = s.update(ctx, id, up, cond)
		if errors.Is(err, session.ErrConflict) && record && tries > 1 {
			// Moved on since it was read: read again.
			return s.recordedChange(ctx, id, c, build, tries-1)
		}
		return after, record, err
	}
	cond = cond.And(expression.Name("live_tenant").Equal(expression.Value(it.LiveTenant)))
	err = Transact(ctx, s.api, "",
		s.sessions.UpdateOp(sessionKey{id}, up, expression.AttributeExists(expression.Name("session_id")).And(cond)),
		s.idempotency.UpdateOp(liveKey(it.LiveTenant), countBy(-1, s.now())))
	var canceled *TxCanceledError
	if errors.As(err, &canceled) && len(canceled.Reasons) > 0 && canceled.Reasons[0] == "ConditionalCheckFailed" {
		if record && tries > 1 {
			return s.recordedChange(ctx, id, c, build, tries-1)
		}
		return session.Session{}, false, fmt.Errorf("session %s: %w", id, session.ErrConflict)
	}
	if err != nil {
		return session.Session{}, false, fmt.Errorf("end session %s: %w", id, err)
	}
	after, err = s.Get(ctx, id)
	return after, record, err
}

// AddToken appends a token hash to a live session holding fewer than MaxTokens.
func (s *Sessions) AddToken(ctx context.Context, id, tokenHash string) error {
	up := expression.Set(expression.Name("token_hashes"),
		expression.ListAppend(expression.IfNotExists(expression.Name("token_hashes"), expression.Value([]string{})),
			expression.Value([]string{tokenHash})))
	// size() of an absent attribute is no number: a session holding no token yet
	// would fail the condition without the first alternative.
	room := expression.AttributeNotExists(expression.Name("token_hashes")).
		Or(expression.Size(expression.Name("token_hashes")).LessThan(expression.Value(session.MaxTokens)))
	cond := inStates(session.Live).And(room)
	_, err := s.update(ctx, id, up, cond)
	return err
}

// ClaimLaunch takes the launch lease of generation gen of a provisioning
// session: the first claim of its current generation, or the replacement of an
// expired claim of generation gen-1, which moves the session to gen. It
// records the claim's bootstrap code and removes any sandbox token.
func (s *Sessions) ClaimLaunch(ctx context.Context, id string, gen int, c session.LaunchClaim) error {
	now := s.now()
	generation, lease := expression.Name("generation"), expression.Name("launch_lease")
	up := expression.Set(expression.Name("bootstrap_code_hash"), expression.Value(c.BootstrapCodeHash)).
		Set(expression.Name("bootstrap_expires"), expression.Value(c.CodeExpires.UnixMilli())).
		Remove(expression.Name("sandbox_token_hash")).
		Remove(expression.Name("push_connection_id")).
		Set(lease, expression.Value(c.LeaseUntil.UnixMilli())).
		Set(generation, expression.Value(gen)).
		Set(expression.Name("updated_at"), expression.Value(now.UTC().Format(time.RFC3339Nano)))
	first := generation.Equal(expression.Value(gen)).And(expression.AttributeNotExists(lease))
	replacement := generation.Equal(expression.Value(gen - 1)).And(lease.LessThan(expression.Value(now.UnixMilli())))
	cond := inStates(session.Starting).
		And(expression.AttributeNotExists(expression.Name("sandbox_ref"))).
		And(expression.Or(first, replacement))
	_, err := s.update(ctx, id, up, cond)
	return err
}

// RedeemBootstrap spends the unexpired bootstrap code codeHash of generation
// gen of a live session in one conditional write, recording the sandbox token
// hash in its place: of two exchanges of one code, one wins.
func (s *Sessions) RedeemBootstrap(ctx context.Context, id string, gen int, codeHash, sandboxTokenHash string) error {
	now := s.now()
	code, expires := expression.Name("bootstrap_code_hash"), expression.Name("bootstrap_expires")
	up := expression.Set(expression.Name("sandbox_token_hash"), expression.Value(sandboxTokenHash)).
		Set(expression.Name("updated_at"), expression.Value(now.UTC().Format(time.RFC3339Nano))).
		Remove(code).Remove(expires)
	cond := inStates(session.Live).
		And(expression.Name("generation").Equal(expression.Value(gen))).
		And(code.Equal(expression.Value(codeHash))).
		And(expires.GreaterThan(expression.Value(now.UnixMilli())))
	_, err := s.update(ctx, id, up, cond)
	return err
}

// Touch sets fields on a live session of the given generation.
func (s *Sessions) Touch(ctx context.Context, id string, generation int, set session.Fields) (session.Session, error) {
	up := setDue(setFields(expression.Set(expression.Name("updated_at"), expression.Value(s.now().UTC().Format(time.RFC3339Nano))), set), set)
	cond := inStates(session.Live).And(expression.Name("generation").Equal(expression.Value(generation)))
	return s.update(ctx, id, up, cond)
}

// SetEndsAt sets when a live session ends; with extendOnly, only if it
// ends before at.
func (s *Sessions) SetEndsAt(ctx context.Context, id string, at time.Time, extendOnly bool) (session.Session, error) {
	end := expression.Name("ends_at")
	up := expression.Set(end, expression.Value(at.UnixMilli())).
		Set(expression.Name("updated_at"), expression.Value(s.now().UTC().Format(time.RFC3339Nano)))
	cond := inStates(session.Live)
	if extendOnly {
		cond = cond.And(expression.AttributeNotExists(end).Or(end.LessThan(expression.Value(at.UnixMilli()))))
	}
	return s.update(ctx, id, up, cond)
}

// SetEgress replaces a live session's egress policy if it is still of
// version, and counts the change.
func (s *Sessions) SetEgress(ctx context.Context, id string, version int, p egress.Policy) (session.Session, error) {
	if p.Allow == nil {
		p.Allow = []string{}
	}
	up := expression.Set(expression.Name("egress"), expression.Value(p)).
		Set(expression.Name("egress_version"), expression.Value(version+1)).
		Set(expression.Name("updated_at"), expression.Value(s.now().UTC().Format(time.RFC3339Nano)))
	same := expression.Name("egress_version").Equal(expression.Value(version))
	if version == 0 {
		same = expression.AttributeNotExists(expression.Name("egress_version")).Or(same)
	}
	return s.update(ctx, id, up, inStates(session.Live).And(same))
}

// pushKey is the idempotency table's item that names the session of a push
// connection, for ClearPushConnection ($disconnect names only the connection).
func pushKey(connectionID string) map[string]string {
	return map[string]string{"key": "push#" + connectionID}
}

// pushRecord is that item.
type pushRecord struct {
	Key       string `json:"key"`
	SessionID string `json:"session_id"`
	ExpiresAt int64  `json:"expires_at"`
}

// SetPushConnection records the push connection of a live session's sandbox
// of generation gen, and the connection's session, in one transaction.
func (s *Sessions) SetPushConnection(ctx context.Context, id string, gen int, connectionID string, expires time.Time) error {
	up := expression.Set(expression.Name("push_connection_id"), expression.Value(connectionID)).
		Set(expression.Name("updated_at"), expression.Value(s.now().UTC().Format(time.RFC3339Nano)))
	cond := expression.AttributeExists(expression.Name("session_id")).
		And(inStates(session.Live)).
		And(expression.Name("generation").Equal(expression.Value(gen)))
	err := Transact(ctx, s.api, "",
		s.sessions.UpdateOp(sessionKey{id}, up, cond),
		s.idempotency.PutOp(pushRecord{Key: pushKey(connectionID)["key"], SessionID: id, ExpiresAt: expires.Unix()}))
	var canceled *TxCanceledError
	if errors.As(err, &canceled) && len(canceled.Reasons) == 2 && canceled.Reasons[0] == "ConditionalCheckFailed" {
		return fmt.Errorf("session %s: %w", id, session.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("record push connection of %s: %w", id, err)
	}
	return nil
}

// ClearPushConnection removes a push connection from its session, if the
// session still holds it; the record of the connection's session expires.
func (s *Sessions) ClearPushConnection(ctx context.Context, connectionID string) error {
	var rec pushRecord
	err := s.idempotency.Get(ctx, pushKey(connectionID), &rec)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find push connection: %w", err)
	}
	conn := expression.Name("push_connection_id")
	err = s.sessions.Update(ctx, sessionKey{rec.SessionID}, expression.Remove(conn), nil, conn.Equal(expression.Value(connectionID)))
	if err != nil && !errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("clear push connection of %s: %w", rec.SessionID, err)
	}
	return nil // the record expires (TTL)
}

// AddUsage adds u to the session's usage counters with one ADD: concurrent
// adds all count, and an absent counter starts at 0.
func (s *Sessions) AddUsage(ctx context.Context, id string, u session.Usage) error {
	up := expression.Add(expression.Name("input_tokens"), expression.Value(u.InputTokens)).
		Add(expression.Name("output_tokens"), expression.Value(u.OutputTokens)).
		Add(expression.Name("cached_tokens"), expression.Value(u.CachedTokens)).
		Add(expression.Name("model_calls"), expression.Value(u.Calls)).
		Add(expression.Name("cost_micro_usd"), expression.Value(u.CostMicroUSD)).
		Add(expression.Name("cost_committed"), expression.Value(u.CostMicroUSD)).
		// A model call is activity (the idle timeout's).
		Set(expression.Name("last_activity_at"), expression.Value(s.now().UTC().Format(time.RFC3339Nano)))
	err := s.sessions.Update(ctx, sessionKey{id}, up, nil, expression.AttributeExists(expression.Name("session_id")))
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		return fmt.Errorf("session %s: %w", id, session.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("add usage to session %s: %w", id, err)
	}
	return nil
}

// AppendEvents reserves sequence numbers on the session item (an atomic counter),
// then writes the events in one transaction.
func (s *Sessions) AppendEvents(ctx context.Context, id string, generation int, events []session.Event) ([]session.Event, error) {
	return s.appendEvents(ctx, id, generation, events, nil)
}

// AppendOnce appends events and their idempotency record (seq: the last
// event's) in one transaction; ErrIdempotencyTaken, and nothing written, if
// the key is used.
func (s *Sessions) AppendOnce(ctx context.Context, id string, generation int, events []session.Event, rec session.IdempotencyRecord) ([]session.Event, error) {
	return s.appendEvents(ctx, id, generation, events, &rec)
}

func (s *Sessions) appendEvents(ctx context.Context, id string, generation int, events []session.Event, rec *session.IdempotencyRecord) ([]session.Event, error) {
	n := len(events)
	if n == 0 || n > session.MaxEventsPerAppend {
		return nil, fmt.Errorf("append %d events: want 1..%d", n, session.MaxEventsPerAppend)
	}
	// An event is activity (the idle timeout's).
	stamp := s.now().UTC().Format(time.RFC3339Nano)
	up := expression.Add(expression.Name("event_seq"), expression.Value(n)).
		Set(expression.Name("updated_at"), expression.Value(stamp)).
		Set(expression.Name("last_activity_at"), expression.Value(stamp))
	cond := inStates(session.Live).And(expression.Name("generation").Equal(expression.Value(generation)))
	var counter struct {
		Seq     int64    `json:"event_seq"`
		Viewers []string `json:"viewers"`
	}
	if err := s.sessions.Update(ctx, sessionKey{id}, up, &counter, expression.AttributeExists(expression.Name("session_id")).And(cond)); err != nil {
		var cf *ConditionFailedError
		if errors.As(err, &cf) {
			return nil, fmt.Errorf("session %s: %w", id, session.ErrConflict)
		}
		return nil, err
	}
	now := s.now().UTC()
	out := make([]session.Event, n)
	ops := make([]TxOp, n)
	for i, e := range events {
		e.SessionID = id
		e.Seq = counter.Seq - int64(n) + int64(i) + 1
		if e.At.IsZero() {
			e.At = now
		}
		e.ExpiresAt = now.Add(session.Retention + 24*time.Hour).Unix()
		out[i] = e
		ops[i] = s.events.PutOp(e, expression.AttributeNotExists(expression.Name("seq")))
	}
	if rec != nil {
		rec.Seq = out[n-1].Seq
		ops = append(ops, s.idempotency.PutOp(rec, expression.AttributeNotExists(expression.Name("key"))))
	}
	err := Transact(ctx, s.api, "", ops...)
	var canceled *TxCanceledError
	if rec != nil && errors.As(err, &canceled) && len(canceled.Reasons) == len(ops) && canceled.Reasons[n] == "ConditionalCheckFailed" {
		return nil, fmt.Errorf("append to %s: %w", id, session.ErrIdempotencyTaken)
	}
	if err != nil {
		return nil, fmt.Errorf("store events of %s: %w", id, err)
	}
	if s.OnAppend != nil && len(counter.Viewers) > 0 {
		s.OnAppend(ctx, id, counter.Viewers, out)
	}
	return out, nil
}

// Events reads a page of a session's events after a sequence number.
func (s *Sessions) Events(ctx context.Context, id string, after int64, limit int) ([]session.Event, error) {
	var out []session.Event
	_, err := s.events.Query(ctx, Query{
		Key: expression.Key("session_id").Equal(expression.Value(id)).
			And(expression.Key("seq").GreaterThan(expression.Value(after))),
		Limit:      limit,
		Consistent: true,
	}, &out)
	return out, err
}

func (s *Sessions) update(ctx context.Context, id string, up expression.UpdateBuilder, cond expression.ConditionBuilder) (session.Session, error) {
	var it sessionItem
	cond = expression.AttributeExists(expression.Name("session_id")).And(cond)
	err := s.sessions.Update(ctx, sessionKey{id}, up, &it, cond)
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		if len(cf.Item) == 0 {
			return session.Session{}, fmt.Errorf("session %s: %w", id, session.ErrNotFound)
		}
		return session.Session{}, fmt.Errorf("session %s: %w", id, session.ErrConflict)
	}
	return it.session(), err
}

func inStates(states []session.State) expression.ConditionBuilder {
	operands := make([]expression.OperandBuilder, 0, len(states))
	for _, st := range states {
		operands = append(operands, expression.Value(st))
	}
	if len(operands) == 1 {
		return expression.Name("state").Equal(operands[0])
	}
	return expression.Name("state").In(operands[0], operands[1:]...)
}

// setFields adds f's non-zero fields to up, under their attribute names, times
// as RFC 3339 strings in UTC.
func setFields(up expression.UpdateBuilder, f session.Fields) expression.UpdateBuilder {
	str := func(name, v string) {
		if v != "" {
			up = up.Set(expression.Name(name), expression.Value(v))
		}
	}
	at := func(name string, t time.Time) {
		if !t.IsZero() {
			str(name, t.UTC().Format(time.RFC3339Nano))
		}
	}
	str("guardrails_version_hash", f.GuardrailsHash)
	str("served_guardrails_hash", f.ServedGuardrailsHash)
	at("prompt_injected_at", f.PromptInjectedAt)
	at("ready_at", f.ReadyAt)
	at("heartbeat_at", f.HeartbeatAt)
	str("sandbox_ref", f.SandboxRef)
	str("snapshot_key", f.SnapshotKey)
	str("checkpoint_id", f.CheckpointID)
	at("paused_at", f.PausedAt)
	if f.PausedFor > 0 {
		up = up.Set(expression.Name("paused_ms"), expression.Value(f.PausedFor.Milliseconds()))
	}
	str("workspace_dropped", f.WorkspaceDropped)
	if f.WorkspaceStatus != nil {
		up = up.Set(expression.Name("workspace_status"), expression.Value(f.WorkspaceStatus))
	}
	if f.Resources != nil {
		// Under its JSON names, as the session is read back.
		up = up.Set(expression.Name("resources"), expression.Value(map[string]float64{
			"cpu_percent": f.Resources.CPUPercent, "memory_mb": f.Resources.MemoryMB,
			"files": float64(f.Resources.Files), "log_bytes": float64(f.Resources.LogBytes)}))
	}
	at("rate_limited_at", f.RateLimitedAt)
	at("last_activity_at", f.LastActivityAt)
	at("claim_by", f.ClaimBy)
	at("claimed_at", f.ClaimedAt)
	return up
}

// ListByTenant reads a page of a tenant's sessions from the by_tenant index,
// newest first; f is a filter expression, so a page's cost is its limit.
func (s *Sessions) ListByTenant(ctx context.Context, tenant string, f session.ListFilter, limit int, after string) ([]session.Session, string, error) {
	q := Query{
		Index:      resources.SessionsByTenant,
		Key:        expression.Key("tenant").Equal(expression.Value(tenant)),
		Limit:      limit,
		After:      Cursor(after),
		Scope:      map[string]string{"tenant": tenant},
		Descending: true,
	}
	var conds []expression.ConditionBuilder
	eq := func(name, v string) {
		if v != "" {
			conds = append(conds, expression.Name(name).Equal(expression.Value(v)))
		}
	}
	eq("project_name", f.ProjectName)
	eq("persona_slug", f.PersonaSlug)
	eq("agent_type", f.AgentType)
	if len(f.States) > 0 {
		ops := make([]expression.OperandBuilder, 0, len(f.States))
		for _, st := range f.States {
			ops = append(ops, expression.Value(st))
		}
		in := expression.Name("state").In(ops[0], ops[1:]...)
		conds = append(conds, in)
	}
	switch len(conds) {
	case 0:
	case 1:
		q.Filter = &conds[0]
	default:
		and := expression.And(conds[0], conds[1], conds[2:]...)
		q.Filter = &and
	}
	var items []sessionItem
	next, err := s.sessions.Query(ctx, q, &items)
	if errors.Is(err, ErrBadCursor) {
		return nil, "", session.ErrBadCursor
	}
	if err != nil {
		return nil, "", err
	}
	out := make([]session.Session, len(items))
	for i, it := range items {
		out[i] = it.session()
	}
	return out, string(next), nil
}

// Due reads a watch shard of the by_due index: the live sessions due before
// the time, most overdue first.
func (s *Sessions) Due(ctx context.Context, shard string, before time.Time, limit int) ([]string, error) {
	var out []struct {
		ID string `json:"session_id"`
	}
	_, err := s.sessions.Query(ctx, Query{
		Index: resources.SessionsByDue,
		Key: expression.Key("watch_shard").Equal(expression.Value(shard)).
			And(expression.Key("due_at").LessThan(expression.Value(before.UnixMilli()))),
		Limit: limit,
	}, &out)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(out))
	for i, o := range out {
		ids[i] = o.ID
	}
	return ids, nil
}

// setDue moves the session's due time when f shows life (session.DueAfter).
func setDue(up expression.UpdateBuilder, f session.Fields) expression.UpdateBuilder {
	if due := session.DueAfter(f); !due.IsZero() {
		up = up.Set(expression.Name("due_at"), expression.Value(due.UnixMilli()))
	}
	return up
}

// appEventOnceFor is how long an app event's once key is kept.
const appEventOnceFor = time.Hour

// AppendAppEvent appends e to tenant's app stream (session.AppStream),
// unless once is used: a once record, then the stream's counter (an item
// of the idempotency table, ADD), then the event.
func (s *Sessions) AppendAppEvent(ctx context.Context, tenant, once string, e session.Event) (session.Event, bool, error) {
	now := s.now().UTC()
	if once != "" {
		rec := map[string]any{"key": "appevent#" + tenant + "#" + once, "expires_at": now.Add(appEventOnceFor).Unix()}
		err := s.idempotency.Put(ctx, rec, expression.AttributeNotExists(expression.Name("key")))
		if errors.Is(err, ErrConditionFailed) {
			return session.Event{}, false, nil
		}
		if err != nil {
			return session.Event{}, false, fmt.Errorf("app event of %s: %w", tenant, err)
		}
	}
	var counter struct {
		N int64 `json:"n"`
	}
	if err := s.idempotency.Update(ctx, map[string]string{"key": "appstream#" + tenant},
		expression.Add(expression.Name("n"), expression.Value(1)), &counter); err != nil {
		return session.Event{}, false, fmt.Errorf("app stream of %s: %w", tenant, err)
	}
	e.SessionID, e.Seq = session.AppStream(tenant), counter.N
	if e.At.IsZero() {
		e.At = now
	}
	e.ExpiresAt = now.Add(session.Retention + 24*time.Hour).Unix()
	if err := s.events.Put(ctx, e, expression.AttributeNotExists(expression.Name("seq"))); err != nil {
		return session.Event{}, false, fmt.Errorf("app event of %s: %w", tenant, err)
	}
	return e, true, nil
}
