package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Memory implements every role of the session store.
var (
	_ session.Lifecycle       = (*Memory)(nil)
	_ session.Launches        = (*Memory)(nil)
	_ session.EventLog        = (*Memory)(nil)
	_ session.Metering        = (*Memory)(nil)
	_ session.QuotaCounts     = (*Memory)(nil)
	_ session.Fleet           = (*Memory)(nil)
	_ session.PushConnections = (*Memory)(nil)
	_ session.Store           = (*Memory)(nil)
)

// Memory is an in-memory session.Store for unit tests of logic that uses one. It
// behaves as dynamo.Sessions does (Run checks both): the same conditions, the same
// errors, the same fields set on the side. Values go in and out as copies, through
// JSON, so numbers in event data come back as float64, as they do from DynamoDB.
type Memory struct {
	// Now is the clock; nil means time.Now. Set it before first use.
	Now func() time.Time

	mu       sync.Mutex
	sessions map[string]memSession
	records  map[string]session.IdempotencyRecord
	events   map[string][]session.Event
	// conns maps push connections to their sessions.
	conns map[string]string
	// creates counts creates per tenant and minute (Admit).
	creates map[string]int
	// periods are the tenants' spend per day and month (Hold, Settle).
	periods map[string]spent
}

type memSession struct {
	// s.LastSeq is the event counter, kept on the session item by
	// dynamo.Sessions.
	s session.Session
	// listKey, watched and liveTenant are what dynamo.Sessions keeps as the
	// item's index keys (list_key, watch_shard, live_tenant).
	listKey    string
	watched    bool
	liveTenant string
	// costHeld is what the session's calls under way hold (Hold).
	costHeld int64
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{
		sessions: map[string]memSession{},
		records:  map[string]session.IdempotencyRecord{},
		events:   map[string][]session.Event{},
		conns:    map[string]string{},
	}
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Create writes a new session and its idempotency record, all or nothing.
func (m *Memory) Create(ctx context.Context, s session.Session, rec *session.IdempotencyRecord) error {
	return m.Admit(ctx, s, rec, session.Admission{})
}

// Admit writes s and rec if the tenant's live sessions and its creates in
// a.Minute stay within a's limits.
func (m *Memory) Admit(_ context.Context, s session.Session, rec *session.IdempotencyRecord, a session.Admission) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec != nil {
		if _, ok := m.records[rec.Key]; ok {
			return fmt.Errorf("create session %s: %w", s.ID, session.ErrIdempotencyTaken)
		}
	}
	if _, ok := m.sessions[s.ID]; ok {
		return fmt.Errorf("create session %s: already exists", s.ID)
	}
	live := s.Tenant != "" && slices.Contains(session.Live, s.State)
	if live && a.LiveLimit > 0 && m.liveLocked(s.Tenant) >= a.LiveLimit {
		return fmt.Errorf("create session %s: %w", s.ID, &session.QuotaError{Quota: session.QuotaConcurrentSessions})
	}
	if a.MinuteLimit > 0 && s.Tenant != "" {
		if m.creates == nil {
			m.creates = map[string]int{}
		}
		k := s.Tenant + "#" + a.Minute.UTC().Format(time.RFC3339)
		if m.creates[k] >= a.MinuteLimit {
			return fmt.Errorf("create session %s: %w", s.ID, &session.QuotaError{Quota: session.QuotaCreatesPerMinute})
		}
		m.creates[k]++
	}
	ms := memSession{s: clone(s), watched: !s.DueAt.IsZero()}
	ms.s.DueAt = millis(s.DueAt)
	ms.s.LastSeq = 0
	if e, ok := session.CreatedEvent(s, s.CreatedAt); ok {
		e.Seq, ms.s.LastSeq = 1, 1
		e.ExpiresAt = m.now().Add(session.Retention + 24*time.Hour).Unix()
		m.events[s.ID] = append(m.events[s.ID], e)
	}
	if s.Tenant != "" {
		ms.listKey = session.ListKey(s.CreatedAt, s.ID)
		if slices.Contains(session.Live, s.State) {
			ms.liveTenant = s.Tenant
		}
	}
	m.sessions[s.ID] = ms
	if rec != nil {
		m.records[rec.Key] = *rec
	}
	return nil
}

// Remember writes rec unless its key is used.
func (m *Memory) Remember(_ context.Context, rec session.IdempotencyRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.records[rec.Key]; ok {
		return fmt.Errorf("remember %s: %w", rec.Key, session.ErrIdempotencyTaken)
	}
	m.records[rec.Key] = rec
	return nil
}

// Get reads a session.
func (m *Memory) Get(_ context.Context, id string) (session.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.sessions[id]
	if !ok {
		return session.Session{}, fmt.Errorf("session %s: %w", id, session.ErrNotFound)
	}
	return clone(ms.s), nil
}

// Idempotency reads an idempotency record.
func (m *Memory) Idempotency(_ context.Context, key string) (session.IdempotencyRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[key]
	if !ok {
		return session.IdempotencyRecord{}, fmt.Errorf("idempotency record: %w", session.ErrNotFound)
	}
	return rec, nil
}

// Transition applies c if the session is in one of c.From (and of c.Generation).
func (m *Memory) Transition(_ context.Context, id string, c session.Change) (session.Session, error) {
	now := m.now().UTC()
	return m.update(id, func(s *session.Session) error {
		if !slices.Contains(c.From, s.State) || (c.Generation != 0 && s.Generation != c.Generation) {
			return session.ErrConflict
		}
		record := session.RecordsChange(*s, c.To)
		s.State = c.To
		s.UpdatedAt = now
		if c.Reason != "" {
			s.Reason = c.Reason
		}
		switch c.To {
		case session.Ending:
			s.DueAt = millis(now.Add(session.EndingLimit))
		case session.Pausing:
			s.DueAt = millis(now.Add(session.PausingLimit))
		case session.Paused:
			s.DueAt = time.Time{} // no sandbox to show life
		case session.Resuming:
			// A new launch, as dynamo.Sessions makes it.
			s.Generation++
			s.DueAt = millis(now.Add(session.ProvisioningLimit))
			s.SandboxRef, s.SandboxTokenHash, s.PushConnectionID, s.BootstrapCodeHash, s.PoolSandbox = "", "", "", "", ""
			s.BootstrapExpires, s.LaunchLease, s.HeartbeatAt = time.Time{}, time.Time{}, time.Time{}
		}
		if err := set(s, c.Set); err != nil {
			return err
		}
		if c.To.Terminal() {
			s.EndedAt = now
			s.DueAt, s.Streams = time.Time{}, nil
		}
		if e, ok := session.LifeEvent(*s, now); ok && record {
			// In the same write, as dynamo.Sessions' number is (m.mu is held).
			s.LastSeq++
			e.Seq = s.LastSeq
			e.ExpiresAt = now.Add(session.Retention + 24*time.Hour).Unix()
			m.events[id] = append(m.events[id], e)
		}
		return nil
	})
}

// AddToken appends a token hash to a live session holding fewer than MaxTokens.
func (m *Memory) AddToken(_ context.Context, id, tokenHash string) error {
	_, err := m.update(id, func(s *session.Session) error {
		if !slices.Contains(session.Live, s.State) || len(s.TokenHashes) >= session.MaxTokens {
			return session.ErrConflict
		}
		s.TokenHashes = append(s.TokenHashes, tokenHash)
		return nil
	})
	return err
}

// ClaimLaunch takes the launch lease of generation gen of a provisioning
// session: the first claim of its current generation, or the replacement of an
// expired claim of generation gen-1, which moves the session to gen.
func (m *Memory) ClaimLaunch(_ context.Context, id string, gen int, c session.LaunchClaim) error {
	now := m.now()
	_, err := m.update(id, func(s *session.Session) error {
		first := s.Generation == gen && s.LaunchLease.IsZero()
		replacement := s.Generation == gen-1 && !s.LaunchLease.IsZero() && s.LaunchLease.UnixMilli() < now.UnixMilli()
		if !slices.Contains(session.Starting, s.State) || s.SandboxRef != "" {
			return session.ErrConflict
		}
		if !first && !replacement {
			return session.ErrConflict
		}
		s.Generation = gen
		s.SandboxTokenHash, s.PushConnectionID = "", ""
		s.BootstrapCodeHash, s.BootstrapExpires = c.BootstrapCodeHash, millis(c.CodeExpires)
		s.LaunchLease = millis(c.LeaseUntil)
		s.UpdatedAt = now.UTC()
		return nil
	})
	return err
}

// RedeemBootstrap spends the unexpired bootstrap code codeHash of generation
// gen of a live session, recording the sandbox token hash in its place.
func (m *Memory) RedeemBootstrap(_ context.Context, id string, gen int, codeHash, sandboxTokenHash string) error {
	now := m.now()
	_, err := m.update(id, func(s *session.Session) error {
		if !slices.Contains(session.Live, s.State) || s.Generation != gen || s.BootstrapCodeHash == "" ||
			s.BootstrapCodeHash != codeHash || s.BootstrapExpires.UnixMilli() <= now.UnixMilli() {
			return session.ErrConflict
		}
		s.SandboxTokenHash = sandboxTokenHash
		s.BootstrapCodeHash, s.BootstrapExpires = "", time.Time{}
		s.UpdatedAt = now.UTC()
		return nil
	})
	return err
}

// Touch sets fields on a live session of the given generation.
func (m *Memory) Touch(_ context.Context, id string, generation int, fields session.Fields) (session.Session, error) {
	now := m.now().UTC()
	return m.update(id, func(s *session.Session) error {
		if !slices.Contains(session.Live, s.State) || s.Generation != generation {
			return session.ErrConflict
		}
		s.UpdatedAt = now
		return set(s, fields)
	})
}

// SetEndsAt sets when a live session ends; with extendOnly, only if it
// ends before at.
func (m *Memory) SetEndsAt(_ context.Context, id string, at time.Time, extendOnly bool) (session.Session, error) {
	now := m.now().UTC()
	return m.update(id, func(s *session.Session) error {
		if !slices.Contains(session.Live, s.State) || (extendOnly && !s.EndsAt.IsZero() && s.EndsAt.UnixMilli() >= at.UnixMilli()) {
			return session.ErrConflict
		}
		s.EndsAt, s.UpdatedAt = millis(at), now
		return nil
	})
}

// SetEgress replaces a live session's egress policy if it is still of
// version, and counts the change.
func (m *Memory) SetEgress(_ context.Context, id string, version int, p egress.Policy) (session.Session, error) {
	now := m.now().UTC()
	return m.update(id, func(s *session.Session) error {
		if !slices.Contains(session.Live, s.State) || s.EgressVersion != version {
			return session.ErrConflict
		}
		p.Allow = append([]string{}, p.Allow...)
		s.Egress, s.EgressVersion, s.UpdatedAt = &p, version+1, now
		return nil
	})
}

// SetPushConnection records the push connection of a live session's sandbox
// of generation gen.
func (m *Memory) SetPushConnection(_ context.Context, id string, gen int, connectionID string, _ time.Time) error {
	now := m.now().UTC()
	_, err := m.update(id, func(s *session.Session) error {
		if !slices.Contains(session.Live, s.State) || s.Generation != gen {
			return session.ErrConflict
		}
		s.PushConnectionID, s.UpdatedAt = connectionID, now
		return nil
	})
	if err == nil {
		m.mu.Lock()
		m.conns[connectionID] = id
		m.mu.Unlock()
	}
	return err
}

// ClearPushConnection forgets a push connection, and removes it from its
// session if the session still holds it.
func (m *Memory) ClearPushConnection(_ context.Context, connectionID string) error {
	m.mu.Lock()
	id, ok := m.conns[connectionID]
	delete(m.conns, connectionID)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	_, err := m.update(id, func(s *session.Session) error {
		if s.PushConnectionID != connectionID {
			return session.ErrConflict
		}
		s.PushConnectionID = ""
		return nil
	})
	if errors.Is(err, session.ErrConflict) || errors.Is(err, session.ErrNotFound) {
		return nil
	}
	return err
}

// AddUsage adds u to the session's usage.
func (m *Memory) AddUsage(_ context.Context, id string, u session.Usage) error {
	_, err := m.update(id, func(s *session.Session) error {
		s.InputTokens += u.InputTokens
		s.OutputTokens += u.OutputTokens
		s.CachedTokens += u.CachedTokens
		s.ModelCalls += u.Calls
		s.CostMicroUSD += u.CostMicroUSD
		s.LastActivityAt = m.now().UTC()
		return nil
	})
	return err
}

// AppendEvents numbers events and stores them, all or nothing.
func (m *Memory) AppendEvents(_ context.Context, id string, generation int, events []session.Event) ([]session.Event, error) {
	return m.append(id, generation, events, nil)
}

// AppendOnce appends events with their idempotency record, all or nothing.
func (m *Memory) AppendOnce(_ context.Context, id string, generation int, events []session.Event, rec session.IdempotencyRecord) ([]session.Event, error) {
	return m.append(id, generation, events, &rec)
}

func (m *Memory) append(id string, generation int, events []session.Event, rec *session.IdempotencyRecord) ([]session.Event, error) {
	n := len(events)
	if n == 0 || n > session.MaxEventsPerAppend {
		return nil, fmt.Errorf("append %d events: want 1..%d", n, session.MaxEventsPerAppend)
	}
	now := m.now().UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.sessions[id]
	// As in dynamo.Sessions, an absent session is a failed condition: ErrConflict.
	if !ok || !slices.Contains(session.Live, ms.s.State) || ms.s.Generation != generation {
		return nil, fmt.Errorf("session %s: %w", id, session.ErrConflict)
	}
	// dynamo.Sessions reserves the numbers before it writes the events, so a
	// refused record leaves a gap; so does this.
	ms.s.LastSeq += int64(n)
	ms.s.UpdatedAt, ms.s.LastActivityAt = now, now
	m.sessions[id] = ms
	if rec != nil {
		if _, taken := m.records[rec.Key]; taken {
			return nil, fmt.Errorf("append to %s: %w", id, session.ErrIdempotencyTaken)
		}
	}
	out := make([]session.Event, n)
	for i, e := range events {
		e = clone(e)
		e.SessionID = id
		e.Seq = ms.s.LastSeq - int64(n) + int64(i) + 1
		if e.At.IsZero() {
			e.At = now
		}
		e.ExpiresAt = now.Add(session.Retention + 24*time.Hour).Unix()
		out[i] = e
	}
	m.events[id] = append(m.events[id], out...)
	if rec != nil {
		rec.Seq = out[n-1].Seq
		m.records[rec.Key] = *rec
	}
	return clone(out), nil
}

// AppendAppEvent appends e to tenant's app stream unless once is used.
func (m *Memory) AppendAppEvent(_ context.Context, tenant, once string, e session.Event) (session.Event, bool, error) {
	now := m.now().UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	if once != "" {
		key := "appevent#" + tenant + "#" + once
		if _, used := m.records[key]; used {
			return session.Event{}, false, nil
		}
		m.records[key] = session.IdempotencyRecord{Key: key}
	}
	stream := session.AppStream(tenant)
	e = clone(e)
	e.SessionID, e.Seq = stream, int64(len(m.events[stream])+1)
	if e.At.IsZero() {
		e.At = now
	}
	e.ExpiresAt = now.Add(session.Retention + 24*time.Hour).Unix()
	m.events[stream] = append(m.events[stream], e)
	return clone(e), true, nil
}

// Events returns up to limit events after the sequence number after, in order.
func (m *Memory) Events(_ context.Context, id string, after int64, limit int) ([]session.Event, error) {
	switch {
	case limit == 0:
		limit = 100 // dynamo.DefaultPageSize
	case limit < 0 || limit > 1000: // dynamo.MaxPageSize
		return nil, fmt.Errorf("events of %s: page size %d outside 1..1000", id, limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	evs := m.events[id]
	i := sort.Search(len(evs), func(i int) bool { return evs[i].Seq > after })
	out := evs[i:min(len(evs), i+limit)]
	if len(out) == 0 {
		return nil, nil
	}
	return clone(out), nil
}

// update runs change on a copy of the session and stores the copy if change
// returns nil: a failed condition writes nothing.
func (m *Memory) update(id string, change func(*session.Session) error) (session.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.sessions[id]
	if !ok {
		return session.Session{}, fmt.Errorf("session %s: %w", id, session.ErrNotFound)
	}
	s := clone(ms.s)
	if err := change(&s); err != nil {
		return session.Session{}, fmt.Errorf("session %s: %w", id, err)
	}
	ms.s = s
	if s.State.Terminal() {
		ms.watched, ms.liveTenant = false, "" // out of the indexes
	}
	m.sessions[id] = ms
	return clone(s), nil
}

// set sets fields of s by their JSON names, as an update expression sets attributes.
func set(s *session.Session, f session.Fields) error {
	str := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	at := func(dst *time.Time, t time.Time) {
		if !t.IsZero() {
			*dst = t.UTC()
		}
	}
	str(&s.GuardrailsHash, f.GuardrailsHash)
	str(&s.ServedGuardrailsHash, f.ServedGuardrailsHash)
	at(&s.PromptInjectedAt, f.PromptInjectedAt)
	at(&s.ReadyAt, f.ReadyAt)
	at(&s.HeartbeatAt, f.HeartbeatAt)
	if due := session.DueAfter(f); !due.IsZero() {
		s.DueAt = millis(due) // terminal transitions clear it after
	}
	str(&s.SandboxRef, f.SandboxRef)
	str(&s.SnapshotKey, f.SnapshotKey)
	str(&s.CheckpointID, f.CheckpointID)
	at(&s.PausedAt, f.PausedAt)
	if f.PausedFor > 0 {
		s.PausedFor = f.PausedFor.Truncate(time.Millisecond)
	}
	str(&s.WorkspaceDropped, f.WorkspaceDropped)
	if f.WorkspaceStatus != nil {
		s.WorkspaceStatus = clone(f.WorkspaceStatus)
	}
	if f.Resources != nil {
		s.Resources = clone(f.Resources)
	}
	at(&s.RateLimitedAt, f.RateLimitedAt)
	at(&s.LastActivityAt, f.LastActivityAt)
	at(&s.ClaimBy, f.ClaimBy)
	at(&s.ClaimedAt, f.ClaimedAt)
	return nil
}

// clone deep-copies v through JSON, as a write and a read through a database do.
func clone[T any](v T) T {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("storetest: %v", err))
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(fmt.Sprintf("storetest: %v", err))
	}
	return out
}

// ListByTenant reads a tenant's sessions that have a list key, newest first,
// as dynamo.Sessions does from its index: limit sessions read per call, those
// not matching f dropped, and a cursor (the last list key read) while there
// may be more.
func (m *Memory) ListByTenant(_ context.Context, tenant string, f session.ListFilter, limit int, after string) ([]session.Session, string, error) {
	if limit < 1 {
		return nil, "", fmt.Errorf("list sessions: limit %d", limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	start := ""
	if after != "" {
		t, key, ok := strings.Cut(after, "|")
		if !ok || t != tenant || key == "" {
			return nil, "", session.ErrBadCursor
		}
		start = key
	}
	var all []memSession
	for _, ms := range m.sessions {
		if ms.s.Tenant == tenant && ms.listKey != "" && (start == "" || ms.listKey < start) {
			all = append(all, ms)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].listKey > all[j].listKey })
	next := ""
	if len(all) > limit {
		all = all[:limit]
		next = tenant + "|" + all[limit-1].listKey
	}
	var out []session.Session
	for _, ms := range all {
		if session.Matches(ms.s, f) {
			out = append(out, clone(ms.s))
		}
	}
	return out, next, nil
}

// Due returns the ids of a shard's live sessions due before the time, most
// overdue first.
func (m *Memory) Due(_ context.Context, shard string, before time.Time, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []session.Session
	for _, ms := range m.sessions {
		if ms.watched && session.WatchShard(ms.s.ID) == shard && !ms.s.DueAt.IsZero() && ms.s.DueAt.UnixMilli() < before.UnixMilli() {
			due = append(due, ms.s)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].DueAt.Before(due[j].DueAt) })
	ids := make([]string, 0, min(limit, len(due)))
	for _, s := range due[:min(limit, len(due))] {
		ids = append(ids, s.ID)
	}
	return ids, nil
}

// CountLive counts tenant's live sessions, up to limit.
func (m *Memory) CountLive(_ context.Context, tenant string, limit int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return min(m.liveLocked(tenant), limit), nil
}

// LiveCount is tenant's live sessions: exact, as the in-memory store has
// no lagging index.
func (m *Memory) LiveCount(_ context.Context, tenant string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.liveLocked(tenant), nil
}

// RepairLive has nothing to repair: the count is the sessions'.
func (m *Memory) RepairLive(ctx context.Context, tenant string, _ time.Duration) (int, error) {
	return m.LiveCount(ctx, tenant)
}

func (m *Memory) liveLocked(tenant string) int {
	n := 0
	for _, ms := range m.sessions {
		if ms.liveTenant == tenant {
			n++
		}
	}
	return n
}

// OpenStream records an open stream of session id, unless limit unlapsed
// ones are open.
func (m *Memory) OpenStream(_ context.Context, id, stream string, until, now time.Time, limit int) error {
	_, err := m.update(id, func(s *session.Session) error {
		if !slices.Contains(session.Live, s.State) {
			return session.ErrConflict
		}
		open := 0
		for k, exp := range s.Streams {
			if exp.UnixMilli() > now.UnixMilli() {
				open++
			} else {
				delete(s.Streams, k)
			}
		}
		if open >= limit {
			return session.ErrConflict
		}
		if s.Streams == nil {
			s.Streams = map[string]time.Time{}
		}
		s.Streams[stream] = millis(until)
		return nil
	})
	return err
}

// GrantUploads adds to session id's upload URLs and bytes unless either
// would pass its part of q.
func (m *Memory) GrantUploads(_ context.Context, id string, urls int, bytes int64, q session.UploadQuota) error {
	_, err := m.update(id, func(s *session.Session) error {
		if !slices.Contains(session.Live, s.State) ||
			(q.URLs > 0 && s.UploadURLs+int64(urls) > int64(q.URLs)) || (q.Bytes > 0 && s.UploadBytes+bytes > q.Bytes) {
			return session.ErrConflict
		}
		s.UploadURLs += int64(urls)
		s.UploadBytes += bytes
		return nil
	})
	return err
}

// CloseStream forgets a stream of session id.
func (m *Memory) CloseStream(_ context.Context, id, stream string) error {
	_, err := m.update(id, func(s *session.Session) error {
		delete(s.Streams, stream)
		return nil
	})
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	return err
}

// AddSpend adds to tenant's spend of day.
func (m *Memory) AddSpend(_ context.Context, tenant string, day time.Time, microUSD int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.periods == nil {
		m.periods = map[string]spent{}
	}
	k := periodOf(tenant, session.ScopeTenantDay, day)
	sp := m.periods[k]
	sp.micro += microUSD
	m.periods[k] = sp
	return nil
}

// Spend reads tenant's spend of day.
func (m *Memory) Spend(_ context.Context, tenant string, day time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.periods[periodOf(tenant, session.ScopeTenantDay, day)].micro, nil
}

// millis is t to the millisecond, as dynamo.Sessions keeps due times.
func millis(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// spent is a scope's spend in the memory store: what calls cost, and what
// calls under way hold.
type spent struct{ micro, held int64 }

// admits reports whether a scope that spent sp admits a hold of r under
// limit (see dynamo.Sessions.Hold).
func (sp spent) admits(r, limit int64) bool {
	committed := sp.micro + sp.held
	return committed+r <= limit || sp.held == 0 && committed < limit
}

// Hold holds h.MicroUSD against each capped scope of h, all or none.
func (m *Memory) Hold(_ context.Context, h session.Hold) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.sessions[h.SessionID]
	if !ok {
		return fmt.Errorf("session %s: %w", h.SessionID, session.ErrNotFound)
	}
	type scope struct {
		name  string
		limit int64
		sp    spent
	}
	scopes := []scope{{session.ScopeSession, h.SessionCap, spent{ms.s.CostMicroUSD, ms.costHeld}}}
	if h.Tenant != "" {
		scopes = append(scopes, scope{session.ScopeTenantDay, h.DayCap, m.periods[periodOf(h.Tenant, session.ScopeTenantDay, h.At)]},
			scope{session.ScopeTenantMonth, h.MonthCap, m.periods[periodOf(h.Tenant, session.ScopeTenantMonth, h.At)]})
	}
	for _, sc := range scopes {
		if sc.limit > 0 && !sc.sp.admits(h.MicroUSD, sc.limit) {
			return &session.BudgetError{Scope: sc.name, Exhausted: sc.sp.micro >= sc.limit, CapMicroUSD: sc.limit, SpentMicroUSD: sc.sp.micro}
		}
	}
	m.moveLocked(h, 0, 1)
	return nil
}

// Settle records what the call of h used and gives back what h held.
func (m *Memory) Settle(_ context.Context, h session.Hold, u session.Usage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.sessions[h.SessionID]
	if !ok {
		return fmt.Errorf("session %s: %w", h.SessionID, session.ErrNotFound)
	}
	ms.s.InputTokens += u.InputTokens
	ms.s.OutputTokens += u.OutputTokens
	ms.s.CachedTokens += u.CachedTokens
	ms.s.ModelCalls += u.Calls
	ms.s.LastActivityAt = m.now().UTC()
	m.sessions[h.SessionID] = ms
	m.moveLocked(h, u.CostMicroUSD, -1)
	return nil
}

// moveLocked adds cost to h's scopes' spend and sign × h.MicroUSD to the
// holds of those it caps.
func (m *Memory) moveLocked(h session.Hold, cost int64, sign int64) {
	held := func(limit int64) int64 {
		if limit > 0 {
			return sign * h.MicroUSD
		}
		return 0
	}
	ms := m.sessions[h.SessionID]
	ms.s.CostMicroUSD += cost
	ms.costHeld += held(h.SessionCap)
	m.sessions[h.SessionID] = ms
	if h.Tenant == "" {
		return
	}
	if m.periods == nil {
		m.periods = map[string]spent{}
	}
	for _, p := range []struct {
		scope string
		limit int64
	}{{session.ScopeTenantDay, h.DayCap}, {session.ScopeTenantMonth, h.MonthCap}} {
		k := periodOf(h.Tenant, p.scope, h.At)
		sp := m.periods[k]
		sp.micro += cost
		sp.held += held(p.limit)
		m.periods[k] = sp
	}
}

// TenantSpend reads tenant's spend of the period of scope that holds t.
func (m *Memory) TenantSpend(_ context.Context, tenant, scope string, t time.Time) (session.Spent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.periods[periodOf(tenant, scope, t)]
	return session.Spent{MicroUSD: sp.micro, HeldMicroUSD: sp.held}, nil
}

// periodOf keys tenant's spend of the period of scope that holds t.
func periodOf(tenant, scope string, t time.Time) string {
	if scope == session.ScopeTenantMonth {
		return tenant + "#" + t.UTC().Format("2006-01")
	}
	return tenant + "#" + t.UTC().Format("2006-01-02")
}
