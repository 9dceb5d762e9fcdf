package dynamo_test

import (
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	domain "github.com/remote-agents/remote-agents/shared/session" // dynamo_test has a type session
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

// TestSessions runs the contract of every role of the session store against
// DynamoDB Local, one fresh environment of tables per subtest.
func TestSessions(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) domain.Store {
		set, api := setup(t)
		return dynamo.NewSessions(api, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	})
}

// TestSessionItemKeys checks what the domain does not see: the index keys a
// new session's item gets, and its TTL and index keys once it ended.
func TestSessionItemKeys(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	st := dynamo.NewSessions(api, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	id := "5b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d6f"
	created := time.Now().UTC()
	if err := st.Create(t.Context(), domain.Session{ID: id, Tenant: "t1", State: domain.Provisioning, Generation: 1,
		CreatedAt: created, UpdatedAt: created, DueAt: created.Add(domain.ProvisioningLimit)}, nil); err != nil {
		t.Fatal(err)
	}
	type keys struct {
		ListKey    string `json:"list_key"`
		LiveTenant string `json:"live_tenant"`
		WatchShard string `json:"watch_shard"`
		DueAt      int64  `json:"due_at"`
		ExpiresAt  int64  `json:"expires_at"`
	}
	read := func() keys {
		t.Helper()
		var k keys
		if err := dynamo.NewTable(api, set.Sessions.Name).Get(t.Context(), map[string]string{"session_id": id}, &k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	want := keys{ListKey: domain.ListKey(created, id), LiveTenant: "t1", WatchShard: domain.WatchShard(id), DueAt: created.Add(domain.ProvisioningLimit).UnixMilli()}
	if got := read(); got != want {
		t.Errorf("new item's keys %+v, want %+v", got, want)
	}
	before := time.Now()
	ended, err := st.Transition(t.Context(), id, domain.Change{From: domain.Live, To: domain.Ended, Reason: domain.ReasonShutdown})
	if err != nil {
		t.Fatal(err)
	}
	got := read()
	if lo, hi := before.Add(domain.Retention).Unix(), time.Now().Add(domain.Retention).Unix(); got.ExpiresAt < lo || got.ExpiresAt > hi {
		t.Errorf("expires_at %d, want the retention from the end, in [%d, %d]", got.ExpiresAt, lo, hi)
	}
	if got.ListKey != want.ListKey || got.LiveTenant != "" || got.WatchShard != "" || got.DueAt != 0 || !ended.DueAt.IsZero() {
		t.Errorf("ended item's keys %+v (due %s): want it listed, not live, not watched", got, ended.DueAt)
	}
}
