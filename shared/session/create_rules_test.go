package session_test

// The rules of create that are the session package's own, on the in-memory
// store in milliseconds: what a request must hold, projects and personas that
// are not there, guardrails that are not there (fail closed), quotas per app (live agents, creates per minute, the
// daily budget, the platform's and the app key's), the open streams quota,
// and Idempotency-Key (same request, another request, another tenant, an
// ended agent). The system tests (localstack/systemtest) prove the wiring:
// configuration to service, error to HTTP status and Retry-After.

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

// createRig is a creator, a control and streams on the in-memory store whose sandboxes are
// ready as soon as their start is queued, with a clock the test moves.
type createRig struct {
	creator    *session.Creator
	control    *session.Control
	streams    *session.Streams
	store      *storetest.Memory
	guardrails string
	reports    *createReports

	mu  sync.Mutex
	now time.Time
}

func (r *createRig) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

func (r *createRig) set(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = now
}

// newCreateRig returns a rig with quotas q and the clock at now.
func newCreateRig(t *testing.T, q session.Quotas, now time.Time) *createRig {
	t.Helper()
	g := guardrails.File(filepath.Join(t.TempDir(), "guardrails.md"))
	if err := os.WriteFile(string(g), []byte("# Platform rules\n\nBe careful.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &createRig{store: storetest.NewMemory(), guardrails: string(g), reports: &createReports{}, now: now}
	r.store.Now = r.clock
	jobs, log := readyOnStart{store: r.store, now: r.clock}, slog.New(slog.DiscardHandler)
	r.creator = session.NewCreator(session.CreatorOptions{
		Store: r.store, Quotas: q, Registry: demoRegistry{}, Guardrails: g, Reporter: r.reports,
		Jobs: jobs, CreationTimeout: 5 * time.Second, Log: log, Now: r.clock,
	})
	r.control = session.NewControl(session.ControlOptions{Store: r.store, Guardrails: g, Jobs: jobs, Log: log, Now: r.clock})
	r.streams = session.NewStreams(session.StreamsOptions{Store: r.store, Quotas: q, Log: log, Now: r.clock})
	return r
}

// create creates an agent of app with the demo project and persona.
func (r *createRig) create(t *testing.T, app registry.AppKey, key string) (session.Created, error) {
	t.Helper()
	return r.creator.Create(t.Context(), app, session.CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello", IdempotencyKey: key})
}

// mustCreate creates an agent of app and returns it.
func (r *createRig) mustCreate(t *testing.T, app registry.AppKey) session.Created {
	t.Helper()
	c, err := r.create(t, app, "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return c
}

// end ends agent id (its sandbox stopped).
func (r *createRig) end(t *testing.T, id string) {
	t.Helper()
	if _, err := r.store.Transition(t.Context(), id, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonShutdown}); err != nil {
		t.Fatalf("end %s: %v", id, err)
	}
}

// readyOnStart is the jobs queue and the sandbox at once: a queued start
// makes its session ready.
type readyOnStart struct {
	store session.Store
	now   func() time.Time
}

func (p readyOnStart) Publish(ctx context.Context, m jobqueue.Message, _ time.Duration) error {
	if m.Type != jobqueue.SessionStart {
		return nil
	}
	_, err := p.store.Transition(ctx, m.SessionID, session.Change{From: []session.State{session.Provisioning}, To: session.Ready,
		Generation: m.Generation, Set: session.Fields{ReadyAt: p.now()}})
	if errors.Is(err, session.ErrConflict) {
		return nil // ready already: a repeated start
	}
	return err
}

// createReports records the exceptions reported.
type createReports struct {
	mu  sync.Mutex
	got []report.Exception
}

func (r *createReports) Report(_ context.Context, e report.Exception) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, e)
}

func (r *createReports) all() []report.Exception {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]report.Exception(nil), r.got...)
}

// demoRegistry holds the platform's project "demo", its persona "assistant"
// and its persona "retired", not active.
type demoRegistry struct{ registry.Store }

func (demoRegistry) Project(_ context.Context, _, name string) (registry.Project, error) {
	if name != "demo" {
		return registry.Project{}, registry.ErrNotFound
	}
	return registry.Project{Name: name}, nil
}

func (demoRegistry) Persona(_ context.Context, _, slug string) (registry.Persona, error) {
	if slug != "assistant" && slug != "retired" {
		return registry.Persona{}, registry.ErrNotFound
	}
	return registry.Persona{Slug: slug, Name: slug, Active: slug == "assistant"}, nil
}

var (
	appA = registry.AppKey{ID: "dev", Tenant: "tenant-a"}
	appB = registry.AppKey{ID: "dev", Tenant: "tenant-b"}
)

// refused checks that err is a 429 of code with retry seconds and details.
func refused(t *testing.T, err error, c apierror.Code, retry int, details map[string]any) {
	t.Helper()
	var e *apierror.Error
	if !errors.As(err, &e) || e.Code != c || e.RetryAfter != retry {
		t.Fatalf("got %v (retry after %+v), want %s retry after %d s", err, e, c, retry)
	}
	for k, want := range details {
		if e.Details[k] != want {
			t.Errorf("details[%s] = %v, want %v (%v)", k, e.Details[k], want, e.Details)
		}
	}
}

// An app past its creates of this clock minute is refused with the seconds
// to the next minute (rounded up); another app is not; the next minute
// admits it again.
func TestCreatesPerMinuteQuotaRefusesUntilTheNextMinute(t *testing.T) {
	t.Parallel()
	r := newCreateRig(t, session.Quotas{CreatesPerMinute: 2}, time.Date(2026, 11, 29, 12, 0, 45, 200_000_000, time.UTC))
	r.mustCreate(t, appA)
	r.mustCreate(t, appA)
	_, err := r.create(t, appA, "")
	refused(t, err, apierror.QuotaExceeded, 15, map[string]any{"quota": "creates_per_minute", "limit": 2})
	r.mustCreate(t, appB)
	r.set(time.Date(2026, 11, 29, 12, 1, 0, 0, time.UTC))
	r.mustCreate(t, appA)
}

// An app at its live agents quota is refused (retry in 30 s) until one of
// its agents has ended; agents of another app do not count.
func TestLiveAgentsQuotaCountsTheAppsLiveAgents(t *testing.T) {
	t.Parallel()
	r := newCreateRig(t, session.Quotas{ConcurrentSessions: 2}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	first := r.mustCreate(t, appA)
	r.mustCreate(t, appA)
	_, err := r.create(t, appA, "")
	refused(t, err, apierror.QuotaExceeded, session.LiveQuotaRetry, map[string]any{"quota": "concurrent_sessions", "limit": 2})
	r.mustCreate(t, appB)
	r.end(t, first.AgentID)
	r.mustCreate(t, appA)
}

// An app whose model calls cost its daily budget today is refused
// budget_exceeded until the next UTC day; the app key's own budget holds
// where it is the lower; another app is not affected.
func TestDailyBudgetRefusesCreatesUntilTheNextDay(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 23, 59, 0, 500_000_000, time.UTC)
	day := now.Truncate(24 * time.Hour)
	r := newCreateRig(t, session.Quotas{DailyBudgetUSD: 1}, now)
	if err := r.store.AddSpend(t.Context(), appA.Tenant, day, 1_000_000); err != nil {
		t.Fatal(err)
	}
	_, err := r.create(t, appA, "")
	refused(t, err, apierror.BudgetExceeded, 60, map[string]any{"budget": "max_cost_usd_per_day", "limit_usd": 1.0, "spent_usd": 1.0})
	r.mustCreate(t, appB)

	// Under the platform's budget, over the app key's.
	if err := r.store.AddSpend(t.Context(), appB.Tenant, day, 600_000); err != nil {
		t.Fatal(err)
	}
	frugal := appB
	frugal.MaxCostUSDPerDay = 0.5
	_, err = r.create(t, frugal, "")
	refused(t, err, apierror.BudgetExceeded, 60, map[string]any{"limit_usd": 0.5, "spent_usd": 0.6})
	r.mustCreate(t, appB)

	r.set(day.Add(24 * time.Hour))
	r.mustCreate(t, appA)
}

// An agent at its open streams quota is refused one more (retry in 5 s)
// until one closes; an agent that is over has no bound (it only replays).
func TestStreamsQuotaCountsOpenStreams(t *testing.T) {
	t.Parallel()
	r := newCreateRig(t, session.Quotas{StreamsPerSession: 2}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	c := r.mustCreate(t, appA)
	sess, err := r.store.Get(t.Context(), c.AgentID)
	if err != nil {
		t.Fatal(err)
	}
	closeFirst, err := r.streams.OpenStream(t.Context(), sess)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.streams.OpenStream(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	_, err = r.streams.OpenStream(t.Context(), sess)
	refused(t, err, apierror.QuotaExceeded, session.StreamQuotaRetry, map[string]any{"quota": "streams_per_session", "limit": 2})
	closeFirst()
	if _, err := r.streams.OpenStream(t.Context(), sess); err != nil {
		t.Fatalf("a stream once one closed: %v", err)
	}
	// A stream that never said it closed lapses.
	r.set(r.clock().Add(session.StreamLapse + time.Second))
	if _, err := r.streams.OpenStream(t.Context(), sess); err != nil {
		t.Fatalf("a stream once the others lapsed: %v", err)
	}
	r.end(t, c.AgentID)
	ended, err := r.store.Get(t.Context(), c.AgentID)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.streams.OpenStream(t.Context(), ended); err != nil {
			t.Fatalf("a stream of an ended agent: %v", err)
		}
	}
}

// A create's Idempotency-Key is its app's: the same request again is the
// same agent with a new token, another request with it is 409, the same key
// of another tenant's app is that app's own agent; the key of an agent that
// has ended, or that handed out session.MaxTokens tokens, is final (409,
// saying to use a new key).
func TestIdempotencyKeyRules(t *testing.T) {
	t.Parallel()
	r := newCreateRig(t, session.Quotas{}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	first, err := r.create(t, appA, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.create(t, appA, "key-1")
	if err != nil || again.AgentID != first.AgentID || again.SessionToken == first.SessionToken {
		t.Fatalf("the same request again: %+v, %v; first %+v", again, err, first)
	}
	if _, err := r.control.Alive(t.Context(), first.AgentID, first.SessionToken); err != nil {
		t.Errorf("the first token after a repeat: %v", err)
	}
	other := session.CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Something else", IdempotencyKey: "key-1"}
	if _, err := r.creator.Create(t.Context(), appA, other); code(err) != apierror.IdempotencyKeyReused {
		t.Errorf("another request with the key: %v, want %s", err, apierror.IdempotencyKeyReused)
	}
	theirs, err := r.create(t, appB, "key-1")
	if err != nil || theirs.AgentID == first.AgentID {
		t.Fatalf("another tenant's app with the key: %+v, %v", theirs, err)
	}
	if st, err := r.control.Alive(t.Context(), first.AgentID, theirs.SessionToken); err == nil && st.Alive {
		t.Errorf("the other tenant's token works for this tenant's agent: %+v", st)
	}
	final := func(err error, what string) {
		t.Helper()
		if code(err) != apierror.IdempotencyKeyReused || !strings.Contains(err.Error(), "new Idempotency-Key") {
			t.Errorf("%s: %v, want %s saying to use a new key", what, err, apierror.IdempotencyKeyReused)
		}
	}
	r.end(t, first.AgentID)
	_, err = r.create(t, appA, "key-1")
	final(err, "the key of an ended agent")

	if _, err := r.create(t, appA, "cap-1"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < session.MaxTokens; i++ {
		if _, err := r.create(t, appA, "cap-1"); err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
	}
	_, err = r.create(t, appA, "cap-1")
	final(err, "past the token cap")
}

// What a create must hold, each refused 400 invalid_request before anything
// is read or written.
func TestCreateRefusesBadRequests(t *testing.T) {
	t.Parallel()
	r := newCreateRig(t, session.Quotas{}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	ok := session.CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "x"}
	tests := []struct {
		name   string
		change func(*session.CreateRequest)
	}{
		{"missing prompt", func(c *session.CreateRequest) { c.InitialPrompt = "" }},
		{"blank prompt", func(c *session.CreateRequest) { c.InitialPrompt = "  \n\t" }},
		{"over-long prompt", func(c *session.CreateRequest) { c.InitialPrompt = strings.Repeat("x", 33*1024) }},
		{"missing project", func(c *session.CreateRequest) { c.ProjectName = "" }},
		{"over-long project", func(c *session.CreateRequest) { c.ProjectName = strings.Repeat("p", session.MaxNameLen+1) }},
		{"missing persona", func(c *session.CreateRequest) { c.PersonaSlug = "" }},
		{"bad slug", func(c *session.CreateRequest) { c.PersonaSlug = "../etc" }},
		{"upper-case slug", func(c *session.CreateRequest) { c.PersonaSlug = "Assistant" }},
		{"unknown session type", func(c *session.CreateRequest) { c.SessionType = "admin" }},
		{"setup without a configuration", func(c *session.CreateRequest) { c.SessionType = "setup" }},
		{"bad agent type", func(c *session.CreateRequest) { c.AgentType = "../default" }},
		{"over-long idempotency key", func(c *session.CreateRequest) { c.IdempotencyKey = strings.Repeat("k", session.MaxIdempotencyKeyLen+1) }},
		{"idempotency key with a space", func(c *session.CreateRequest) { c.IdempotencyKey = "a b" }},
	}
	for _, tt := range tests {
		req := ok
		tt.change(&req)
		if _, err := r.creator.Create(t.Context(), appA, req); code(err) != apierror.InvalidRequest {
			t.Errorf("%s: %v, want %s", tt.name, err, apierror.InvalidRequest)
		}
	}
	if n, err := r.store.CountLive(t.Context(), appA.Tenant, 10); err != nil || n != 0 {
		t.Errorf("%d sessions written for refused requests (%v)", n, err)
	}
}

// A project or persona that is not there, or a persona that is not active,
// is 404; an agent that is not there is 404 to shutdown, and not alive to
// alive, which says nothing else.
func TestCreateOfWhatIsNotThere(t *testing.T) {
	t.Parallel()
	r := newCreateRig(t, session.Quotas{}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	for _, tt := range []struct {
		project, persona string
		want             apierror.Code
	}{
		{"nope", "assistant", apierror.ProjectNotFound},
		{"demo", "ghost", apierror.PersonaNotFound},
		{"demo", "retired", apierror.PersonaNotFound},
	} {
		_, err := r.creator.Create(t.Context(), appA, session.CreateRequest{ProjectName: tt.project, PersonaSlug: tt.persona, InitialPrompt: "x"})
		if code(err) != tt.want {
			t.Errorf("project %s, persona %s: %v, want %s", tt.project, tt.persona, err, tt.want)
		}
	}
	c := r.mustCreate(t, appA)
	const unknown = "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b6a"
	if _, err := r.control.Shutdown(t.Context(), unknown, c.SessionToken); code(err) != apierror.AgentNotFound {
		t.Errorf("shutdown of an unknown agent: %v, want %s", err, apierror.AgentNotFound)
	}
	st, err := r.control.Alive(t.Context(), unknown, c.SessionToken)
	if err != nil || !reflect.DeepEqual(st, session.AliveStatus{AgentID: unknown, State: "unknown", Status: "unknown"}) {
		t.Errorf("alive of an unknown agent: %+v, %v", st, err)
	}
}

// Guardrails missing, empty, blank or unreadable: create fails closed with
// 503 guardrails_missing, not naming where they are, before any session
// exists, and reports a critical guardrail_injection exception.
func TestCreateFailsClosedWithoutGuardrails(t *testing.T) {
	t.Parallel()
	for name, breakIt := range map[string]func(path string) error{
		"missing":    os.Remove,
		"empty":      func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"whitespace": func(p string) error { return os.WriteFile(p, []byte("  \n\t \n"), 0o600) },
		"unreadable": func(p string) error { return errors.Join(os.Remove(p), os.Mkdir(p, 0o700)) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newCreateRig(t, session.Quotas{}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			if err := breakIt(r.guardrails); err != nil {
				t.Fatal(err)
			}
			_, err := r.create(t, appA, "")
			if code(err) != apierror.GuardrailsMissing || strings.Contains(err.Error(), r.guardrails) {
				t.Errorf("create: %v, want %s not naming the file", err, apierror.GuardrailsMissing)
			}
			if n, err := r.store.CountLive(t.Context(), appA.Tenant, 10); err != nil || n != 0 {
				t.Errorf("%d sessions created without guardrails (%v)", n, err)
			}
			got := r.reports.all()
			if len(got) != 1 || got[0].Source != "guardrail_injection" || got[0].Severity != report.Critical || got[0].Context["persona_slug"] != "assistant" {
				t.Errorf("reports %+v, want one critical guardrail_injection", got)
			}
		})
	}
}

// neverReady is a jobs queue whose sandboxes do not get ready by themselves.
type neverReady struct{}

func (neverReady) Publish(context.Context, jobqueue.Message, time.Duration) error { return nil }

// No create leaves an agent unreachable: one that answers 408 names the
// agent and the Idempotency-Key to take it up with (assigned when the
// request had none); the create sent again with it hands the agent out once
// it is ready; an agent nobody takes up ends, unclaimed, UnclaimedLimit
// after the 408.
func TestTimedOutCreateCanBeTakenUp(t *testing.T) {
	t.Parallel()
	r := newCreateRig(t, session.Quotas{}, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	g := guardrails.File(r.guardrails)
	r.creator = session.NewCreator(session.CreatorOptions{Store: r.store, Registry: demoRegistry{}, Guardrails: g, Reporter: r.reports,
		Jobs: neverReady{}, CreationTimeout: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler), Now: r.clock})
	timedOut := func(key string) (id, handle string) {
		t.Helper()
		_, err := r.create(t, appA, key)
		var e *apierror.Error
		if !errors.As(err, &e) || e.Code != apierror.AgentCreationTimeout {
			t.Fatalf("create: %v, want agent_creation_timeout", err)
		}
		id, _ = e.Details["agent_id"].(string)
		handle, _ = e.Details["idempotency_key"].(string)
		if id == "" || handle == "" || !strings.Contains(e.Message, handle) {
			t.Fatalf("408 %+v: no agent id or no key to take it up with", e)
		}
		return id, handle
	}
	ready := func(id string) {
		t.Helper()
		if _, err := r.store.Transition(t.Context(), id, session.Change{From: []session.State{session.Provisioning}, To: session.Ready, Set: session.Fields{ReadyAt: r.clock(), HeartbeatAt: r.clock()}}); err != nil {
			t.Fatal(err)
		}
	}

	// Without a key of its own: the platform assigns one.
	id, key := timedOut("")
	if !strings.HasPrefix(key, "ra-") {
		t.Errorf("assigned key %q", key)
	}
	if again, k := timedOut(key); again != id || k != key {
		t.Errorf("the create sent again with the key waits on %s (%s), want %s", again, k, id)
	}
	ready(id)
	got, err := r.create(t, appA, key)
	if err != nil || got.AgentID != id || got.SessionToken == "" {
		t.Fatalf("the create sent again once ready: %+v %v", got, err)
	}
	r.set(r.clock().Add(session.UnclaimedLimit + time.Minute))
	if sess, _ := r.store.Get(t.Context(), id); sess.Unclaimed(r.clock()) || session.OverLimit(registry.SessionLimits{}, sess, r.clock()) != "" {
		t.Errorf("an agent taken up is still unclaimed: %+v", sess)
	}

	// With its own key, never sent again: ended once UnclaimedLimit passed.
	lost, own := timedOut("mine-1")
	if own != "mine-1" {
		t.Errorf("the 408 names key %q, want the request's own", own)
	}
	ready(lost)
	sess, _ := r.store.Get(t.Context(), lost)
	if why := session.OverLimit(registry.SessionLimits{}, sess, r.clock().Add(session.UnclaimedLimit-time.Second)); why != "" {
		t.Errorf("unclaimed before its limit: %s", why)
	}
	if why := session.OverLimit(registry.SessionLimits{}, sess, r.clock().Add(session.UnclaimedLimit+time.Second)); why != session.ReasonUnclaimed {
		t.Errorf("past its limit: %q, want unclaimed", why)
	}
}
