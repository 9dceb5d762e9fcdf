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

// TestRepairLive: a live counter a crash (here, a write behind the store's
// back) left off is set to the by_live index's count once it has been quiet,
// and left alone while creates and ends move it.
func TestRepairLive(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	st := dynamo.NewSessions(api, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	now := time.Now().UTC()
	for _, id := range []string{"5b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d60", "5b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d61"} {
		if err := st.Create(t.Context(), domain.Session{ID: id, Tenant: "t1", State: domain.Working, Generation: 1, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
	}
	off := struct {
		Key string `json:"key"`
		N   int    `json:"n"`
		At  int64  `json:"at"`
	}{"quota#live#t1", 7, now.Add(-time.Hour).UnixMilli()}
	if err := dynamo.NewTable(api, set.Idempotency.Name).Put(t.Context(), off); err != nil {
		t.Fatal(err)
	}
	if n, err := st.RepairLive(t.Context(), "t1", 2*time.Hour); err != nil || n != 7 {
		t.Errorf("within the quiet time: %d (%v), want the counter left at 7", n, err)
	}
	// The index lags the table: the repair reads it until it has both.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := st.RepairLive(t.Context(), "t1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("repaired to %d, want the 2 live sessions", n)
		}
	}
	if n, err := st.LiveCount(t.Context(), "t1"); err != nil || n != 2 {
		t.Errorf("live count after the repair: %d (%v), want 2", n, err)
	}
}
