package dynamo_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// TestTypeQuota: a tenant's agent types and their warm pools together stay
// within its TypeQuota, exactly, however many creates race; a pool grown
// past it is refused and one made smaller frees room; another tenant and
// the platform are not counted.
func TestTypeQuota(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	reg := dynamo.NewRegistry(api, set.Registry.Name)
	reg.TypeQuota = registry.TypeQuota{Types: 5, PoolSandboxes: 6}
	typ := func(tenant, id string, pool int) registry.AgentType {
		return registry.AgentType{ID: id, Name: id, Tenant: tenant, Workspace: registry.WorkspaceConfig{Enabled: true, WarmPoolSize: pool}, CreatedAt: time.Now()}
	}
	quota := func(err error) string {
		var qe *registry.QuotaError
		if errors.As(err, &qe) && errors.Is(err, registry.ErrOverQuota) {
			return qe.Quota
		}
		return fmt.Sprint(err)
	}
	// Ten creates at once, each with a pool of 1: five types, and their five
	// pool sandboxes, are kept.
	var mu sync.Mutex
	made, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			err := reg.CreateAgentType(t.Context(), typ("t1", fmt.Sprintf("type-%d", i), 1))
			mu.Lock()
			defer mu.Unlock()
			switch q := quota(err); {
			case err == nil:
				made++
			case q == registry.QuotaAgentTypes:
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if made != 5 || refused != 5 {
		t.Fatalf("%d types made, %d refused; want 5 and 5", made, refused)
	}
	types, err := reg.ListAgentTypes(t.Context(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	var mine []registry.AgentType
	for _, ty := range types {
		if ty.Tenant == "t1" {
			mine = append(mine, ty)
		}
	}
	if len(mine) != 5 {
		t.Fatalf("t1 has %d types, want 5", len(mine))
	}
	// Pools: 5 of 6 are kept; one more sandbox fits, two do not.
	grow := func(id string, size int) error {
		return reg.SetWorkspaceConfig(t.Context(), "t1", id, registry.WorkspaceConfig{Enabled: true, WarmPoolSize: size}, time.Now())
	}
	if q := quota(grow(mine[0].ID, 3)); q != registry.QuotaWarmSandboxes {
		t.Errorf("a pool grown from 1 to 3 (7 of 6): %s, want the warm_sandboxes quota", q)
	}
	if err := grow(mine[0].ID, 2); err != nil {
		t.Errorf("a pool grown from 1 to 2 (6 of 6): %v", err)
	}
	if err := grow(mine[1].ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := grow(mine[2].ID, 2); err != nil {
		t.Errorf("a pool grown once another shrank: %v", err)
	}
	// Another tenant and the platform have their own room.
	if err := reg.CreateAgentType(t.Context(), typ("t2", "big", 6)); err != nil {
		t.Errorf("another tenant's type: %v", err)
	}
	if q := quota(reg.CreateAgentType(t.Context(), typ("t3", "too-big", 7))); q != registry.QuotaWarmSandboxes {
		t.Errorf("a type whose own pool passes the quota: %s", q)
	}
	if err := reg.CreateAgentType(t.Context(), typ(registry.Platform, "shared-"+set.Env, 50)); err != nil {
		t.Errorf("a platform type: %v", err)
	}
}
