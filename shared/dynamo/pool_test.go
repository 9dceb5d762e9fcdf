package dynamo_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/pool"
	domain "github.com/remote-agents/remote-agents/shared/session"
)

// TestPoolClaims: against DynamoDB Local, of concurrent claims of one idle
// sandbox by many sessions exactly one wins, and of concurrent claims of
// many idle sandboxes by one session exactly one wins; a claimed sandbox is
// never idle again, nor removed as a warm one.
func TestPoolClaims(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	p := dynamo.NewPool(api, set.Registry.Name, set.Sessions.Name)
	sessions := dynamo.NewSessions(api, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	ctx := t.Context()
	now := time.Now()
	idle := func() pool.Sandbox {
		t.Helper()
		sb := pool.Sandbox{ID: pool.IDPrefix + uuid.NewString(), Owner: "t1", AgentType: "warm", Version: "v1", State: pool.Starting,
			LaunchCodeHash: "code", CodeExpires: now.Add(time.Minute).UnixMilli(), CreatedAt: now.UnixMilli(), HeartbeatAt: now.UnixMilli()}
		if err := p.Add(ctx, sb); err != nil {
			t.Fatal(err)
		}
		if err := p.SetRef(ctx, sb.ID, "ref-"+sb.ID); err != nil {
			t.Fatal(err)
		}
		if err := p.RedeemLaunchCode(ctx, sb.ID, "code", "key-"+sb.ID, now); err != nil {
			t.Fatal(err)
		}
		if err := p.RedeemLaunchCode(ctx, sb.ID, "code", "again", now); !errors.Is(err, pool.ErrTaken) {
			t.Fatalf("a launch code spent twice: %v", err)
		}
		got, err := p.Heartbeat(ctx, sb.ID, true, now)
		if err != nil || got.State != pool.Idle {
			t.Fatalf("heartbeat idle: %+v %v", got, err)
		}
		return got
	}
	provisioning := func() domain.Session {
		t.Helper()
		s := domain.Session{ID: uuid.NewString(), State: domain.Provisioning, Generation: 1, CreatedAt: now, UpdatedAt: now}
		if err := sessions.Create(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
		return s
	}
	claim := func(sb pool.Sandbox, s domain.Session) error {
		return p.Claim(ctx, sb, pool.Claim{SessionID: s.ID, Generation: 1, CodeExpires: now.Add(time.Minute), At: now})
	}

	t.Run("one sandbox, many sessions", func(t *testing.T) {
		sb := idle()
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			s := provisioning()
			wg.Go(func() { errs[i] = claim(sb, s) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, pool.ErrTaken) && !errors.Is(err, dynamo.ErrConditionFailed):
				// A transaction conflict is DynamoDB's answer to racing ones.
				t.Logf("claim: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d claims of one sandbox won: %v", won, errs)
		}
		got, err := p.Get(ctx, sb.ID)
		if err != nil || got.State != pool.Claimed || got.ClaimedBy == "" {
			t.Fatalf("claimed sandbox: %+v %v", got, err)
		}
		sess, err := sessions.Get(ctx, got.ClaimedBy)
		if err != nil || sess.SandboxRef != sb.Ref || sess.PoolSandbox != sb.ID || sess.BootstrapCodeHash != sb.KeyHash {
			t.Fatalf("its session: %+v %v", sess, err)
		}
		if after, err := p.Heartbeat(ctx, sb.ID, true, now); err != nil || after.State != pool.Claimed {
			t.Errorf("a heartbeat made a claimed sandbox %v (%v)", after.State, err)
		}
		if err := p.Remove(ctx, sb.ID, pool.Starting, pool.Idle); !errors.Is(err, pool.ErrTaken) {
			t.Errorf("a claimed sandbox removed as a warm one: %v", err)
		}
	})

	t.Run("one session, many sandboxes", func(t *testing.T) {
		s := provisioning()
		sbs := []pool.Sandbox{idle(), idle(), idle(), idle()}
		var wg sync.WaitGroup
		errs := make([]error, len(sbs))
		for i, sb := range sbs {
			wg.Go(func() { errs[i] = claim(sb, s) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			}
		}
		if won != 1 {
			t.Fatalf("%d sandboxes claimed by one session: %v", won, errs)
		}
		claimed := 0
		for _, sb := range sbs {
			got, err := p.Get(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State == pool.Claimed {
				claimed++
			}
		}
		if claimed != 1 {
			t.Errorf("%d sandboxes claimed", claimed)
		}
		if err := claim(idle(), s); !errors.Is(err, pool.ErrSessionMoved) {
			t.Errorf("a second claim for a session with a sandbox: %v", err)
		}
	})
}
