package systemtest_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/sandbox/provision/gitserve"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/wiring/jobworker"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
)

// withoutRefillOnClaim leaves refilling the pool to the sweep, which the
// tests queue themselves (the schedule is an hour away): claims count exactly.
func withoutRefillOnClaim() option {
	return func(o *devserver.Options) {
		o.NoPoolRefillOnClaim = true
		o.SweepInterval = time.Hour
	}
}

// poolType creates the agent type id with a warm pool of size.
func (s *stack) poolType(id string, size int) {
	s.t.Helper()
	ws := map[string]any{"enabled": true, "repo_source": map[string]any{"type": "none"}, "warm_pool_size": size}
	if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": id, "name": id, "workspace_config": ws}); r.status != http.StatusCreated {
		s.t.Fatalf("create type: %d %s", r.status, r.raw)
	}
}

// sweep queues a sweep (which replenishes the pool), as the schedule does.
func (s *stack) sweep() {
	s.t.Helper()
	q, err := s.srv.Env.JobsQueue(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]jobqueue.Type{"type": jobqueue.Sweep})
	if _, err := q.Send(s.t.Context(), string(body), 0); err != nil {
		s.t.Fatal(err)
	}
}

// warmPool returns the pool GET /api/v1/agent-types/{id} shows.
func (s *stack) warmPool(id string) (size, idle, starting int) {
	s.t.Helper()
	r := s.call(http.MethodGet, agentTypes+"/"+id, appKey, nil)
	wp, ok := r.body["warm_pool"].(map[string]any)
	if r.status != http.StatusOK || !ok {
		s.t.Fatalf("get type: %d %s", r.status, r.raw)
	}
	return int(wp["size"].(float64)), int(wp["idle"].(float64)), int(wp["starting"].(float64))
}

// waitIdle waits until the pool of type id has n idle sandboxes and none
// starting.
func (s *stack) waitIdle(id string, n int) {
	s.t.Helper()
	eventually(s.t, 90*time.Second, "pool of "+id+" at "+strconv.Itoa(n)+" idle", func() bool {
		_, idle, starting := s.warmPool(id)
		return idle == n && starting == 0
	})
}

func (s *stack) poolStore() *dynamo.Pool { return s.srv.Env.PoolStore() }

// envInt is an integer setting of the test's environment, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestWarmPoolBurst: parallel creates against a pool of size: exactly size
// warm claims and the rest cold starts, no sandbox claimed twice, every
// create ready, and the pool back at its size after the next sweep. The
// issue's 50 against 10 is RA_POOL_TEST_CREATES=50 RA_POOL_TEST_SIZE=10; CI
// runs 16 against 4.
func TestWarmPoolBurst(t *testing.T) {
	creates, size := envInt("RA_POOL_TEST_CREATES", 16), envInt("RA_POOL_TEST_SIZE", 4)
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), withoutRefillOnClaim(), withConfig(func(c *config.RemoteAgents) {
		c.CreationTimeout = 29 * time.Second
	}))
	s.poolType("warm", size)
	if got, idle, _ := s.warmPool("warm"); got != size || idle != 0 {
		t.Fatalf("before the first sweep: size %d idle %d", got, idle)
	}
	s.sweep()
	s.waitIdle("warm", size)
	before := s.poolStore()
	initial, err := before.List(t.Context(), appTenant(t, s), "warm")
	if err != nil {
		t.Fatal(err)
	}

	body := createBody("Hello")
	body["agent_type"] = "warm"
	replies := make([]reply, creates)
	var wg sync.WaitGroup
	for i := range creates {
		wg.Go(func() { replies[i] = s.create(body) })
	}
	wg.Wait()

	warm, refs := 0, map[string]string{}
	claimedBy := map[string]string{}
	for _, r := range replies {
		if r.status != http.StatusOK {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		id := r.str("agent_id")
		a := s.alive(id, r.str("session_token"))
		if a.body["from_pool"] == true {
			warm++
		}
		sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := refs[sess.SandboxRef]; dup || sess.SandboxRef == "" {
			t.Errorf("sandbox %q serves %s and %s", sess.SandboxRef, other, id)
		}
		refs[sess.SandboxRef] = id
		if (a.body["from_pool"] == true) != (sess.PoolSandbox != "") {
			t.Errorf("alive says from_pool %v, the session's pool sandbox is %q", a.body["from_pool"], sess.PoolSandbox)
		}
		if sess.PoolSandbox != "" {
			claimedBy[sess.PoolSandbox] = id
		}
	}
	if warm != size || creates-warm != creates-size {
		t.Errorf("%d warm claims and %d cold starts, want %d and %d", warm, creates-warm, size, creates-size)
	}
	for _, sb := range initial {
		if _, ok := claimedBy[sb.ID]; !ok {
			t.Errorf("pool sandbox %s was not claimed", sb.ID)
		}
	}
	after, err := before.List(t.Context(), appTenant(t, s), "warm")
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range after {
		if sb.State == pool.Claimed && claimedBy[sb.ID] != sb.ClaimedBy {
			t.Errorf("pool sandbox %s is claimed by %s, its session says %s", sb.ID, sb.ClaimedBy, claimedBy[sb.ID])
		}
	}
	s.sweep()
	s.waitIdle("warm", size)
}

// appTenant is the tenant of the dev app key (the owner of the types it
// creates).
func appTenant(t *testing.T, s *stack) string { return appTenantB(t, s) }

// appTenantB is appTenant for tests and benchmarks.
func appTenantB(t testing.TB, s *stack) string {
	t.Helper()
	key, err := s.srv.Env.Registry().AppKeyByHash(t.Context(), token.Hash(appKey))
	if err != nil {
		t.Fatal(err)
	}
	return key.Tenant
}

// TestWarmClaimIsNeitherDoubledNorLost: a start whose worker claimed a warm
// sandbox and died before telling it (the claim's push never went), then
// redelivered, and redelivered again once ready: the sandbox is told, the
// session gets ready on it, and no second sandbox is launched nor the
// claimed one left behind.
func TestWarmClaimIsNeitherDoubledNorLost(t *testing.T) {
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), withoutRefillOnClaim())
	s.poolType("warm", 1)
	s.sweep()
	s.waitIdle("warm", 1)
	tenant := appTenant(t, s)

	// A session as create writes it, whose start no poller will handle: the
	// test plays the worker.
	typ, err := poolservice.AgentTypes(s.srv.Env).Resolve(t.Context(), tenant, "warm")
	if err != nil {
		t.Fatal(err)
	}
	sess := provisioningSession(t, s, tenant, typ)
	// The first worker claims, and dies before it tells the sandbox.
	dead := pool.New(pool.Options{Store: s.poolStore(), Types: poolservice.AgentTypes(s.srv.Env), Image: s.srv.Env.SandboxImage, Launcher: s.srv.Launcher})
	done, err := dead.Claim(t.Context(), sess)
	if err != nil || !done {
		t.Fatalf("claim: %v %v", done, err)
	}
	running := len(s.srv.Launcher.Running())
	worker, err := jobworker.Build(t.Context(), s.srv.Env)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := json.Marshal(jobqueue.Message{Type: jobqueue.SessionStart, SessionID: sess.ID, Generation: 1})
	deliver := func() {
		res, err := worker.Worker(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: string(start)}}})
		if err != nil || len(res.BatchItemFailures) > 0 {
			t.Fatalf("deliver: %v %v", res, err)
		}
	}
	deliver() // redelivered: tells the sandbox
	eventually(t, 30*time.Second, "the session ready on its warm sandbox", func() bool {
		got, err := s.srv.Env.SessionStore().Get(t.Context(), sess.ID)
		return err == nil && !got.ReadyAt.IsZero()
	})
	deliver() // once more, ready: nothing
	got, err := s.srv.Env.SessionStore().Get(t.Context(), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.srv.Launcher.Running()); n != running {
		t.Errorf("%d sandboxes running, %d before the redeliveries", n, running)
	}
	if got.PoolSandbox == "" || got.Generation != 1 || got.SandboxRef == "" || !slices.Contains(s.srv.Launcher.Running(), got.SandboxRef) {
		t.Errorf("session after the redeliveries: pool %q generation %d ref %q", got.PoolSandbox, got.Generation, got.SandboxRef)
	}
	sb, err := s.poolStore().Get(t.Context(), got.PoolSandbox)
	if err != nil || sb.State != pool.Claimed || sb.ClaimedBy != sess.ID || sb.Ref != got.SandboxRef {
		t.Errorf("pool sandbox: %+v %v", sb, err)
	}
	// Its end is the session's sandbox's end: nothing is left running.
	crash(t, got.SandboxRef)
	eventually(t, 30*time.Second, "the session over once its claimed sandbox stopped", func() bool {
		got, err := s.srv.Env.SessionStore().Get(t.Context(), sess.ID)
		return err == nil && got.State.Terminal()
	})
}

// provisioningSession writes a session of type typ as create does, without
// queueing its start.
func provisioningSession(t *testing.T, s *stack, tenant string, typ registry.AgentType) session.Session {
	t.Helper()
	now := time.Now().UTC()
	id := uuid.NewString()
	_, hash := token.New(token.Session)
	doc, err := guardrails.Load(t.Context(), s.srv.Env.Guardrails())
	if err != nil {
		t.Fatal(err)
	}
	sess := session.Session{
		ID: id, Blueprint: session.Blueprint{
			ProjectName:     "demo",
			PersonaSlug:     "assistant",
			InitialPrompt:   "Hello",
			GuardrailsHash:  doc.Hash,
			TmuxSessionName: "ra-" + id[:8],
			AgentType:       typ.ID,
			Workspace:       &typ.Workspace,
			AgentTypeOwner:  typ.Tenant,
		},
		Tenant: tenant,
		DueAt:  now.Add(session.ProvisioningLimit),
		State:  session.Provisioning, Generation: 1, TokenHashes: []string{hash},
		CreatedAt: now, UpdatedAt: now,
	}
	if err := s.srv.Env.SessionStore().Create(t.Context(), sess, nil); err != nil {
		t.Fatal(err)
	}
	return sess
}

// TestWarmPoolPreparesFixedRepositoryAndRetiresOnChange: a type with a fixed
// repository: its pool sandbox clones it and runs its setup command before
// any session; the session that claims it is ready with the workspace, sees
// the clone and setup events, and the command ran once. A change of the
// type's configuration retires the idle sandbox of the old one (its process
// stopped) and the next sweep starts one of the new.
func TestWarmPoolPreparesFixedRepositoryAndRetiresOnChange(t *testing.T) {
	repo := gitserve.Serve(t, "fixed", []string{"main"}, map[string]map[string]string{"main": {"README.md": "fixed\n"}})
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), withoutRefillOnClaim())
	ws := map[string]any{"enabled": true, "repo_source": map[string]any{"type": "fixed", "url": repo.URL},
		"setup_commands": []string{"echo ran >> setup.log"}, "warm_pool_size": 1}
	if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "fixedwarm", "name": "fixed", "workspace_config": ws}); r.status != http.StatusCreated {
		t.Fatalf("create type: %d %s", r.status, r.raw)
	}
	s.sweep()
	s.waitIdle("fixedwarm", 1)
	tenant := appTenant(t, s)
	idle, err := s.poolStore().List(t.Context(), tenant, "fixedwarm")
	if err != nil || len(idle) != 1 {
		t.Fatalf("pool: %v %v", idle, err)
	}
	workspace := filepath.Join(s.work, "sandboxes", idle[0].ID+"-1")
	if got, err := os.ReadFile(filepath.Join(workspace, "setup.log")); err != nil || string(got) != "ran\n" {
		t.Fatalf("before any claim, setup.log = %q (%v): the pool sandbox did not prepare", got, err)
	}

	body := createBody("Hello")
	body["agent_type"] = "fixedwarm"
	r := s.create(body)
	if r.status != http.StatusOK || r.body["workspace"].(map[string]any)["status"] != "ready" {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.str("agent_id")
	if a := s.alive(id, r.str("session_token")); a.body["from_pool"] != true {
		t.Fatalf("not from the pool: %s", a.raw)
	}
	all, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range all {
		if strings.HasPrefix(e.Type, "workspace.") {
			types = append(types, e.Type)
		}
	}
	want := []string{"workspace.creating", "workspace.cloning", "workspace.setup", "workspace.ready"}
	if !slices.Equal(types, want) {
		t.Errorf("workspace events = %v, want %v", types, want)
	}
	if got, _ := os.ReadFile(filepath.Join(workspace, "setup.log")); string(got) != "ran\n" {
		t.Errorf("setup.log = %q: the setup ran again", got)
	}
	if got, _ := os.ReadFile(filepath.Join(workspace, "README.md")); string(got) != "fixed\n" {
		t.Errorf("README.md = %q: not the fixed repository", got)
	}

	// Back to one idle sandbox of this configuration, then a change.
	s.sweep()
	s.waitIdle("fixedwarm", 1)
	old, err := s.poolStore().List(t.Context(), tenant, "fixedwarm")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(old, func(sb pool.Sandbox) bool { return sb.State == pool.Idle })
	if i < 0 {
		t.Fatalf("no idle sandbox: %+v", old)
	}
	stale := old[i]
	ws["setup_commands"] = []string{"echo changed >> setup.log"}
	if r := s.call(http.MethodPut, agentTypes+"/fixedwarm/workspace-config", appKey, ws); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.raw)
	}
	if _, idle, _ := s.warmPool("fixedwarm"); idle != 0 {
		t.Errorf("after the change, %d idle of the new configuration, want 0", idle)
	}
	s.sweep()
	s.waitIdle("fixedwarm", 1)
	if _, err := s.poolStore().Get(t.Context(), stale.ID); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("the stale sandbox is still in the pool: %v", err)
	}
	eventually(t, 15*time.Second, "the stale sandbox's process stopped", func() bool {
		return !slices.Contains(s.srv.Launcher.Running(), stale.Ref)
	})
}
