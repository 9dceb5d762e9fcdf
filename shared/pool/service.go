package pool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/tasksize"
	"github.com/remote-agents/remote-agents/shared/token"
)

// Timing of the pool.
const (
	// DefaultMaxIdle is how long a sandbox stays idle before it is retired
	// (and replaced): a fresh one has the newest of everything.
	DefaultMaxIdle = time.Hour
	// StartLimit is how long a sandbox may take from launch to idle (a
	// Fargate task can wait minutes for capacity and its image).
	StartLimit = 15 * time.Minute
	// lockLease bounds one replenish pass of a type.
	lockLease = 30 * time.Second
	// ClaimedRetention is how long a claimed sandbox's record is kept: it
	// names the session of the sandbox when its task stops.
	ClaimedRetention = 30 * 24 * time.Hour
	// stopGrace is what a retired sandbox gets between SIGTERM and the kill.
	stopGrace = 5 * time.Second
)

// Types lists the agent types that keep a pool (warm_pool_size above 0),
// each resolved as a session of it would copy it (agenttype.Service).
type Types interface {
	Pooled(ctx context.Context) ([]registry.AgentType, error)
}

// Join lists the pooled types of each of ts, in order.
func Join(ts ...Types) Types { return joined(ts) }

type joined []Types

func (j joined) Pooled(ctx context.Context) ([]registry.AgentType, error) {
	var out []registry.AgentType
	for _, t := range j {
		more, err := t.Pooled(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// Options configure a Service.
type Options struct {
	Store    Store
	Types    Types
	Launcher launch.Launcher
	// Notifier pushes the assigned frame to a claimed sandbox; nil: the
	// sandbox learns of its claim at its next heartbeat.
	Notifier session.Notifier
	// Guardrails returns the hash of the platform guardrails now.
	Guardrails func(ctx context.Context) (string, error)
	// Image is what sandboxes run (the task definition, the command): a pool
	// sandbox of another is retired.
	Image string
	// Where pool sandboxes reach the platform (launch.Spec's).
	GatewayURL, ModelGatewayURL, PushURL string
	// GitInsecureHosts are the hosts a fixed repository may be cloned from
	// over plain http or git (config git_insecure_hosts).
	GitInsecureHosts []string
	// MaxIdle is DefaultMaxIdle when 0.
	MaxIdle time.Duration
	// RefillOnClaim refills a type's pool right after each claim, besides
	// the schedule.
	RefillOnClaim bool
	// Metric, if set, hears each start's pool outcome (a claim, or a miss of
	// a type that keeps a pool).
	Metric func(ctx context.Context, agentType string, warm bool)
	Now    func() time.Time
	Log    *slog.Logger
}

// Service runs the warm pool.
type Service struct {
	o Options
}

// New returns the pool service of o.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxIdle == 0 {
		o.MaxIdle = DefaultMaxIdle
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Service{o: o}
}

// Claim gives sess a warm sandbox of its agent type, if the pool has an
// idle one of its configuration version and the current image, and tells
// the sandbox. It reports whether sess's start is done (claimed now, or by
// another delivery meanwhile): false sends it down the cold path.
func (s *Service) Claim(ctx context.Context, sess session.Session) (bool, error) {
	if sess.Workspace == nil || sess.Workspace.WarmPoolSize == 0 || sess.AgentType == "" {
		return false, nil
	}
	owner := cmp.Or(sess.AgentTypeOwner, registry.Platform)
	list, err := s.o.Store.List(ctx, owner, sess.AgentType)
	if err != nil {
		return false, fmt.Errorf("pool of %s: %w", sess.AgentType, err)
	}
	version := Version(*sess.Workspace)
	list = slices.DeleteFunc(list, func(sb Sandbox) bool {
		return sb.State != Idle || sb.Version != version || sb.Image != s.o.Image || sb.Ref == "" || sb.KeyHash == ""
	})
	// Concurrent claims start at different sandboxes (no secret in the order).
	rand.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] }) //nolint:gosec // spreading contention, not a secret
	now := s.o.Now()
	for _, sb := range list {
		err := s.o.Store.Claim(ctx, sb, Claim{SessionID: sess.ID, Generation: sess.Generation, CodeExpires: now.Add(StartLimit), At: now})
		switch {
		case errors.Is(err, ErrTaken):
			continue
		case errors.Is(err, ErrSessionMoved):
			return true, nil
		case err != nil:
			return false, err
		}
		s.o.Log.InfoContext(ctx, "warm sandbox claimed", slog.String("session_id", sess.ID), slog.String("pool_sandbox", sb.ID),
			slog.String("agent_type", sess.AgentType), slog.String("sandbox_ref", sb.Ref))
		s.metric(ctx, sess.AgentType, true)
		sb.ClaimedBy = sess.ID
		s.tell(ctx, sb)
		if s.o.RefillOnClaim {
			if err := s.refill(ctx, owner, sess.AgentType); err != nil {
				s.o.Log.WarnContext(ctx, "pool: refill after a claim", slog.String("agent_type", sess.AgentType), slog.String("error", err.Error()))
			}
		}
		return true, nil
	}
	s.metric(ctx, sess.AgentType, false)
	return false, nil
}

func (s *Service) metric(ctx context.Context, agentType string, warm bool) {
	if s.o.Metric != nil {
		s.o.Metric(ctx, agentType, warm)
	}
}

// Retell tells the sandbox that claimed sess again (a redelivered start: the
// worker that claimed may have died before it told), as long as the sandbox
// has not bootstrapped the session yet.
func (s *Service) Retell(ctx context.Context, sess session.Session) error {
	if sess.PoolSandbox == "" || sess.BootstrapCodeHash == "" {
		return nil
	}
	sb, err := s.o.Store.Get(ctx, sess.PoolSandbox)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if sb.State == Claimed && sb.ClaimedBy == sess.ID {
		s.tell(ctx, sb)
	}
	return nil
}

// tell pushes the claimed sandbox sb its assigned frame. A push that fails is
// no failure: the sandbox's next heartbeat names its session.
func (s *Service) tell(ctx context.Context, sb Sandbox) {
	if s.o.Notifier == nil || sb.PushConnectionID == "" {
		return
	}
	frame, _ := json.Marshal(sandboxwire.Push{Type: sandboxwire.PushAssigned, Session: sb.ClaimedBy})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), session.PushTimeout)
	defer cancel()
	if err := s.o.Notifier.Push(ctx, sb.PushConnectionID, frame); err != nil {
		s.o.Log.WarnContext(ctx, "pool: push the claim; the sandbox's heartbeat will tell it", slog.String("pool_sandbox", sb.ID), slog.String("error", err.Error()))
	}
}

// Exited is told that the pool sandbox id stopped: one never claimed is
// forgotten (the next refill replaces it); a claimed one's session is
// returned ("" none), for its end to be handled as its sandbox's.
func (s *Service) Exited(ctx context.Context, id string) (string, error) {
	sb, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if sb.State == Claimed {
		return sb.ClaimedBy, nil
	}
	err = s.o.Store.Remove(ctx, id, Starting, Idle)
	if errors.Is(err, ErrTaken) {
		// Claimed meanwhile: it was claimed as it died.
		sb, err = s.o.Store.Get(ctx, id)
		if err != nil {
			return "", ignoreNotFound(err)
		}
		return sb.ClaimedBy, nil
	}
	return "", err
}

func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Report says what a replenish pass did.
type Report struct {
	Launched, Retired, Lost int
}

// Replenish brings every pooled type back to its size, and retires what is
// stale: sandboxes of a type that keeps no pool (any more), of another
// configuration version, image or guardrails, idle longer than MaxIdle, or
// silent past session.HeartbeatTimeout (StartLimit while starting).
func (s *Service) Replenish(ctx context.Context) (Report, error) {
	var rep Report
	types, err := s.o.Types.Pooled(ctx)
	if err != nil {
		return rep, fmt.Errorf("pool: list pooled agent types: %w", err)
	}
	all, err := s.o.Store.ListAll(ctx)
	if err != nil {
		return rep, fmt.Errorf("pool: list sandboxes: %w", err)
	}
	guardrails, gerr := s.o.Guardrails(ctx)
	if gerr != nil {
		s.o.Log.WarnContext(ctx, "pool: guardrails unavailable: none is retired for them", slog.String("error", gerr.Error()))
	}
	want := map[string]registry.AgentType{}
	for _, t := range types {
		want[key(cmp.Or(t.Tenant, registry.Platform), t.ID)] = t
	}
	now := s.o.Now()
	for _, sb := range all {
		if !sb.Warm() {
			continue
		}
		t, ok := want[key(sb.Owner, sb.AgentType)]
		why := ""
		switch {
		case !ok:
			why = "its type keeps no pool"
		case sb.Version != Version(t.Workspace):
			why = "its type's configuration changed"
		case sb.Image != s.o.Image:
			why = "the sandbox image changed"
		case gerr == nil && sb.GuardrailsHash != guardrails:
			why = "the guardrails changed"
		case sb.State == Idle && now.Sub(time.UnixMilli(sb.IdleAt)) > s.o.MaxIdle:
			why = "idle too long"
		case sb.State == Idle && now.Sub(time.UnixMilli(sb.HeartbeatAt)) > session.HeartbeatTimeout,
			sb.State == Starting && now.Sub(time.UnixMilli(sb.CreatedAt)) > StartLimit:
			why = "lost"
		}
		if why == "" {
			continue
		}
		if s.retire(ctx, sb, why) {
			if why == "lost" {
				rep.Lost++
			} else {
				rep.Retired++
			}
		}
	}
	for _, t := range types {
		n, err := s.refillType(ctx, t, guardrails)
		rep.Launched += n
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func key(owner, agentType string) string { return owner + "#" + agentType }

// retire removes sb from the pool unless it was claimed meanwhile, and
// stops it.
func (s *Service) retire(ctx context.Context, sb Sandbox, why string) bool {
	err := s.o.Store.Remove(ctx, sb.ID, Starting, Idle)
	if err != nil {
		if !errors.Is(err, ErrTaken) {
			s.o.Log.WarnContext(ctx, "pool: retire", slog.String("pool_sandbox", sb.ID), slog.String("error", err.Error()))
		}
		return false
	}
	s.o.Log.InfoContext(ctx, "pool sandbox retired", slog.String("pool_sandbox", sb.ID), slog.String("agent_type", sb.AgentType), slog.String("why", why))
	if sb.Ref != "" {
		if err := s.o.Launcher.Stop(ctx, sb.Ref, stopGrace); err != nil {
			s.o.Log.WarnContext(ctx, "pool: stop a retired sandbox (it stops at its next heartbeat)", slog.String("pool_sandbox", sb.ID), slog.String("error", err.Error()))
		}
	}
	return true
}

// refill refills one type's pool (after a claim).
func (s *Service) refill(ctx context.Context, owner, agentType string) error {
	types, err := s.o.Types.Pooled(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(types, func(t registry.AgentType) bool {
		return cmp.Or(t.Tenant, registry.Platform) == owner && t.ID == agentType
	})
	if i < 0 {
		return nil
	}
	guardrails, err := s.o.Guardrails(ctx)
	if err != nil {
		return err
	}
	_, err = s.refillType(ctx, types[i], guardrails)
	return err
}

// refillType launches sandboxes of t until its pool is at its size, and
// retires the surplus (two passes that raced), under the type's replenish
// lease: a pass that finds it held leaves the type to its holder.
func (s *Service) refillType(ctx context.Context, t registry.AgentType, guardrails string) (int, error) {
	owner := cmp.Or(t.Tenant, registry.Platform)
	ok, err := s.o.Store.Lock(ctx, owner, t.ID, s.o.Now(), s.o.Now().Add(lockLease))
	if err != nil || !ok {
		return 0, err
	}
	defer func() {
		if err := s.o.Store.Unlock(context.WithoutCancel(ctx), owner, t.ID); err != nil {
			s.o.Log.WarnContext(ctx, "pool: give up the replenish lease", slog.String("agent_type", t.ID), slog.String("error", err.Error()))
		}
	}()
	list, err := s.o.Store.List(ctx, owner, t.ID)
	if err != nil {
		return 0, err
	}
	version := Version(t.Workspace)
	var warm []Sandbox
	for _, sb := range list {
		if sb.Warm() && sb.Version == version && sb.Image == s.o.Image {
			warm = append(warm, sb)
		}
	}
	size := t.Workspace.WarmPoolSize
	if len(warm) > size {
		// The oldest go first.
		slices.SortFunc(warm, func(a, b Sandbox) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
		for _, sb := range warm[:len(warm)-size] {
			s.retire(ctx, sb, "the pool is over its size")
		}
		return 0, nil
	}
	launched := 0
	for range size - len(warm) {
		if err := s.launch(ctx, t, owner, version, guardrails); err != nil {
			return launched, err
		}
		launched++
	}
	return launched, nil
}

// launch starts one pool sandbox of t: registered first (starting, with the
// hash of its launch code), then launched, then its reference recorded.
func (s *Service) launch(ctx context.Context, t registry.AgentType, owner, version, guardrails string) error {
	id := IDPrefix + uuid.NewString()
	code, hash := token.New(token.Bootstrap)
	now := s.o.Now()
	sb := Sandbox{
		ID: id, Owner: owner, AgentType: t.ID, Version: version, Image: s.o.Image, GuardrailsHash: guardrails,
		State: Starting, TmuxSessionName: "ra-" + id[len(IDPrefix):len(IDPrefix)+8], LaunchCodeHash: hash,
		CodeExpires: now.Add(StartLimit).UnixMilli(), CreatedAt: now.UnixMilli(), HeartbeatAt: now.UnixMilli(),
	}
	if t.Workspace.RepoSource.Type == registry.RepoFixed {
		// What needs no session: the fixed repository and its setup.
		sb.Prepare = session.WorkspaceFor(&t.Workspace, nil, s.o.GitInsecureHosts)
	}
	if err := s.o.Store.Add(ctx, sb); err != nil {
		return fmt.Errorf("pool: register a sandbox of %s: %w", t.ID, err)
	}
	size, err := tasksize.Parse(t.Workspace.ResourceLimits.CPU, t.Workspace.ResourceLimits.Memory, t.Workspace.ResourceLimits.Disk)
	if err != nil {
		size = tasksize.Size{}
	}
	ref, err := s.o.Launcher.Launch(ctx, launch.Spec{
		SessionID: id, Generation: 1, Pool: true, GatewayURL: s.o.GatewayURL, BootstrapCode: code,
		ModelGatewayURL: s.o.ModelGatewayURL, PushURL: s.o.PushURL, TmuxSessionName: sb.TmuxSessionName, Size: size,
		Image: t.Workspace.BaseImage, Isolated: t.Workspace.EgressPolicy().Isolated(),
		Offline: t.Workspace.EgressPolicy().Offline(),
	})
	if err != nil {
		_ = s.o.Store.Remove(context.WithoutCancel(ctx), id, Starting, Idle)
		return fmt.Errorf("pool: launch a sandbox of %s: %w", t.ID, err)
	}
	if err := s.o.Store.SetRef(ctx, id, ref); err != nil {
		// Retired or gone meanwhile: nobody else would stop it.
		_ = s.o.Launcher.Stop(context.WithoutCancel(ctx), ref, 0)
		return fmt.Errorf("pool: record the sandbox of %s: %w", t.ID, err)
	}
	s.o.Log.InfoContext(ctx, "pool sandbox launched", slog.String("pool_sandbox", id), slog.String("agent_type", t.ID), slog.String("sandbox_ref", ref))
	return nil
}

// Count returns the idle and starting sandboxes of one agent type's pool
// that are of its current configuration, the type resolved as sessions copy
// it (agenttype.Service.Resolve).
func (s *Service) Count(ctx context.Context, t registry.AgentType) (idle, starting int, err error) {
	list, err := s.o.Store.List(ctx, cmp.Or(t.Tenant, registry.Platform), t.ID)
	if err != nil {
		return 0, 0, err
	}
	version := Version(t.Workspace)
	for _, sb := range list {
		if sb.Version != version {
			continue
		}
		switch sb.State {
		case Idle:
			idle++
		case Starting:
			starting++
		}
	}
	return idle, starting, nil
}
