package pool_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
)

// memStore is the pool's store in memory: the logic of Replenish is tested
// here; dynamo.Pool has its own tests against DynamoDB Local.
type memStore struct {
	mu    sync.Mutex
	items map[string]pool.Sandbox
	locks map[string]time.Time
}

func newMem() *memStore {
	return &memStore{items: map[string]pool.Sandbox{}, locks: map[string]time.Time{}}
}

func (m *memStore) Add(_ context.Context, s pool.Sandbox) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.items[s.ID]; ok {
		return errors.New("exists")
	}
	m.items[s.ID] = s
	return nil
}

func (m *memStore) Get(_ context.Context, id string) (pool.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.items[id]
	if !ok {
		return s, pool.ErrNotFound
	}
	return s, nil
}

func (m *memStore) List(_ context.Context, owner, agentType string) ([]pool.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []pool.Sandbox
	for _, s := range m.items {
		if s.Owner == owner && s.AgentType == agentType {
			out = append(out, s)
		}
	}
	return out, nil
}

func (m *memStore) ListAll(context.Context) ([]pool.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.items)), nil
}

func (m *memStore) change(id string, ok func(pool.Sandbox) bool, f func(*pool.Sandbox)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, found := m.items[id]
	if !found {
		return pool.ErrNotFound
	}
	if !ok(s) {
		return pool.ErrTaken
	}
	f(&s)
	m.items[id] = s
	return nil
}

func (m *memStore) SetRef(_ context.Context, id, ref string) error {
	return m.change(id, pool.Sandbox.Warm, func(s *pool.Sandbox) { s.Ref = ref })
}

func (m *memStore) RedeemLaunchCode(_ context.Context, id, codeHash, keyHash string, now time.Time) error {
	return m.change(id, func(s pool.Sandbox) bool { return s.State == pool.Starting && s.LaunchCodeHash == codeHash },
		func(s *pool.Sandbox) { s.KeyHash, s.LaunchCodeHash, s.HeartbeatAt = keyHash, "", now.UnixMilli() })
}

func (m *memStore) Heartbeat(_ context.Context, id string, idle bool, now time.Time) (pool.Sandbox, error) {
	err := m.change(id, pool.Sandbox.Warm, func(s *pool.Sandbox) {
		s.HeartbeatAt = now.UnixMilli()
		if idle && s.State == pool.Starting {
			s.State, s.IdleAt = pool.Idle, now.UnixMilli()
		}
	})
	if err != nil && !errors.Is(err, pool.ErrTaken) {
		return pool.Sandbox{}, err
	}
	return m.Get(context.Background(), id)
}

func (m *memStore) SetPushConnection(_ context.Context, id, conn string) error {
	return m.change(id, func(pool.Sandbox) bool { return true }, func(s *pool.Sandbox) { s.PushConnectionID = conn })
}

func (m *memStore) Claim(_ context.Context, s pool.Sandbox, c pool.Claim) error {
	return m.change(s.ID, func(cur pool.Sandbox) bool { return cur.State == pool.Idle && cur.Version == s.Version },
		func(cur *pool.Sandbox) { cur.State, cur.ClaimedBy = pool.Claimed, c.SessionID })
}

func (m *memStore) Remove(_ context.Context, id string, states ...pool.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.items[id]
	if !ok {
		return nil
	}
	if !slices.Contains(states, s.State) {
		return pool.ErrTaken
	}
	delete(m.items, id)
	return nil
}

func (m *memStore) Lock(_ context.Context, owner, agentType string, now, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := owner + "#" + agentType
	if held, ok := m.locks[k]; ok && held.After(now) {
		return false, nil
	}
	m.locks[k] = until
	return true, nil
}

func (m *memStore) Unlock(_ context.Context, owner, agentType string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.locks, owner+"#"+agentType)
	return nil
}

// launcher records launches and stops.
type launcher struct {
	mu       sync.Mutex
	launched []launch.Spec
	stopped  []string
}

func (l *launcher) Launch(_ context.Context, spec launch.Spec) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.launched = append(l.launched, spec)
	return "ref-" + spec.SessionID, nil
}

func (l *launcher) Stop(_ context.Context, ref string, _ time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = append(l.stopped, ref)
	return nil
}

type types []registry.AgentType

func (t *types) Pooled(context.Context) ([]registry.AgentType, error) { return slices.Clone(*t), nil }

// fixture is a pool service over memory, with a clock the test moves.
type fixture struct {
	svc        *pool.Service
	store      *memStore
	launcher   *launcher
	types      *types
	now        time.Time
	guardrails string
}

func newFixture(size int) *fixture {
	f := &fixture{store: newMem(), launcher: &launcher{}, now: time.Unix(1_800_000_000, 0), guardrails: "g1"}
	f.types = &types{{ID: "warm", Tenant: "t1", Workspace: registry.WorkspaceConfig{Enabled: true, WarmPoolSize: size, SetupTimeoutSeconds: 300}}}
	f.svc = pool.New(pool.Options{
		Store: f.store, Types: f.types, Launcher: f.launcher, Image: "img1",
		Guardrails: func(context.Context) (string, error) { return f.guardrails, nil },
		Now:        func() time.Time { return f.now },
	})
	return f
}

// idle makes every starting sandbox idle, as their first heartbeats do.
func (f *fixture) idle(t *testing.T) {
	t.Helper()
	all, _ := f.store.ListAll(t.Context())
	for _, s := range all {
		if s.State == pool.Starting {
			if err := f.store.RedeemLaunchCode(t.Context(), s.ID, s.LaunchCodeHash, "key", f.now); err != nil {
				t.Fatal(err)
			}
			if _, err := f.store.Heartbeat(t.Context(), s.ID, true, f.now); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (f *fixture) replenish(t *testing.T) pool.Report {
	t.Helper()
	rep, err := f.svc.Replenish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (f *fixture) warm(t *testing.T) []pool.Sandbox {
	t.Helper()
	all, _ := f.store.ListAll(t.Context())
	return slices.DeleteFunc(all, func(s pool.Sandbox) bool { return !s.Warm() })
}

func TestReplenishFillsAndRetires(t *testing.T) {
	f := newFixture(3)
	if rep := f.replenish(t); rep.Launched != 3 {
		t.Fatalf("first pass: %+v", rep)
	}
	for _, spec := range f.launcher.launched {
		if !spec.Pool || !pool.IsID(spec.SessionID) || spec.BootstrapCode == "" || spec.Generation != 1 {
			t.Errorf("launch spec %+v", spec)
		}
	}
	f.idle(t)
	if rep := f.replenish(t); rep != (pool.Report{}) {
		t.Errorf("a full pool: %+v", rep)
	}

	t.Run("silent past the heartbeat timeout: lost, replaced", func(t *testing.T) {
		f.now = f.now.Add(session.HeartbeatTimeout + time.Second)
		rep := f.replenish(t)
		if rep.Lost != 3 || rep.Launched != 3 || len(f.launcher.stopped) != 3 {
			t.Errorf("report %+v, stopped %v", rep, f.launcher.stopped)
		}
		f.idle(t)
	})
	t.Run("the guardrails changed: retired, replaced", func(t *testing.T) {
		f.guardrails = "g2"
		if rep := f.replenish(t); rep.Retired != 3 || rep.Launched != 3 {
			t.Errorf("report %+v", rep)
		}
		f.idle(t)
	})
	t.Run("the configuration changed", func(t *testing.T) {
		(*f.types)[0].Workspace.SetupCommands = []string{"make"}
		if rep := f.replenish(t); rep.Retired != 3 || rep.Launched != 3 {
			t.Errorf("report %+v", rep)
		}
		f.idle(t)
		for _, s := range f.warm(t) {
			if s.Version != pool.Version((*f.types)[0].Workspace) {
				t.Errorf("sandbox of version %s", s.Version)
			}
		}
	})
	t.Run("idle past the maximum age, heart-beating all along", func(t *testing.T) {
		for range 4 {
			f.now = f.now.Add(20 * time.Minute)
			for _, s := range f.warm(t) {
				if _, err := f.store.Heartbeat(t.Context(), s.ID, true, f.now); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rep := f.replenish(t); rep.Retired != 3 || rep.Launched != 3 {
			t.Errorf("report %+v", rep)
		}
		f.idle(t)
	})
	t.Run("a claimed sandbox is never retired nor counted", func(t *testing.T) {
		ws := (*f.types)[0].Workspace
		sess := session.Session{ID: "s1", Generation: 1, Blueprint: session.Blueprint{AgentType: "warm", AgentTypeOwner: "t1", Workspace: &ws}}
		if done, err := f.svc.Claim(t.Context(), sess); err != nil || !done {
			t.Fatalf("claim: %v %v", done, err)
		}
		f.guardrails = "g3"
		rep := f.replenish(t)
		if rep.Retired != 2 || rep.Launched != 3 {
			t.Errorf("report %+v", rep)
		}
		all, _ := f.store.ListAll(t.Context())
		claimed := slices.IndexFunc(all, func(s pool.Sandbox) bool { return s.State == pool.Claimed && s.ClaimedBy == "s1" })
		if claimed < 0 {
			t.Error("the claimed sandbox is gone")
		}
		if got, err := f.svc.Exited(t.Context(), all[claimed].ID); err != nil || got != "s1" {
			t.Errorf("a claimed sandbox's exit names %q (%v), want its session", got, err)
		}
		f.idle(t)
	})
	t.Run("size 0: no idle compute", func(t *testing.T) {
		(*f.types) = nil
		if rep := f.replenish(t); rep.Retired != 3 || rep.Launched != 0 || len(f.warm(t)) != 0 {
			t.Errorf("report %+v, warm %d", rep, len(f.warm(t)))
		}
	})
}

// TestClaimMatchesTypeVersionAndImage: a session claims only an idle sandbox
// of its type's configuration version and the current image; none is the
// cold path (false).
func TestClaimMatchesTypeVersionAndImage(t *testing.T) {
	f := newFixture(1)
	f.replenish(t)
	f.idle(t)
	ws := (*f.types)[0].Workspace
	other := ws
	other.SetupCommands = []string{"other"}
	cases := []struct {
		name string
		sess session.Session
		want bool
	}{
		{"no type", session.Session{ID: "a", Generation: 1}, false},
		{"another configuration", session.Session{ID: "b", Generation: 1, Blueprint: session.Blueprint{AgentType: "warm", AgentTypeOwner: "t1", Workspace: &other}}, false},
		{"another owner", session.Session{ID: "c", Generation: 1, Blueprint: session.Blueprint{AgentType: "warm", AgentTypeOwner: "t2", Workspace: &ws}}, false},
		{"its own", session.Session{ID: "d", Generation: 1, Blueprint: session.Blueprint{AgentType: "warm", AgentTypeOwner: "t1", Workspace: &ws}}, true},
		{"the pool is empty", session.Session{ID: "e", Generation: 1, Blueprint: session.Blueprint{AgentType: "warm", AgentTypeOwner: "t1", Workspace: &ws}}, false},
	}
	for _, c := range cases {
		if c.name == "another configuration" {
			c.sess.Workspace.WarmPoolSize = 1
		}
		done, err := f.svc.Claim(t.Context(), c.sess)
		if err != nil || done != c.want {
			t.Errorf("%s: claimed %v (%v), want %v", c.name, done, err, c.want)
		}
	}
	if !strings.HasPrefix(f.launcher.launched[0].SessionID, pool.IDPrefix) {
		t.Errorf("pool sandbox id %q", f.launcher.launched[0].SessionID)
	}
}
