package session_test

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

// The sweep ends the silent, the stuck provisioning and the stuck ending, and
// only them, each once, and queues the stop of each.
func TestSweepEndsSilentAndStuckSessions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := now
	store := storetest.NewMemory()
	store.Now = func() time.Time { return clock }
	pub := &publisher{}
	svc := session.NewSweeper(session.SweeperOptions{Store: store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return clock }})

	// Sessions as the stores keep them: watched while live, due when they
	// must next show life.
	put := func(state session.State, created, life time.Time, due time.Time) string {
		id := uuid.NewString()
		s := session.Session{ID: id, Blueprint: session.Blueprint{
			PersonaSlug: "assistant",
		},
			State: state, Generation: 1, CreatedAt: created, UpdatedAt: life,
			HeartbeatAt: life, DueAt: due}
		if state == session.Provisioning {
			s.HeartbeatAt = time.Time{}
		}
		if err := store.Create(t.Context(), s, nil); err != nil {
			t.Fatal(err)
		}
		return id
	}
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	silent := put(session.Working, ago(time.Hour), ago(61*time.Second), ago(time.Second))
	beating := put(session.Idle, ago(time.Hour), ago(5*time.Second), now.Add(55*time.Second))
	stuck := put(session.Provisioning, ago(session.ProvisioningLimit+time.Second), time.Time{}, ago(time.Second))
	provisioning := put(session.Provisioning, ago(time.Minute), time.Time{}, now.Add(session.ProvisioningLimit-time.Minute))
	ending := put(session.Ending, ago(time.Hour), ago(session.EndingLimit+time.Second), ago(time.Second))

	rep, err := svc.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lost != 1 || rep.Stuck != 1 || rep.Ended != 1 || rep.Checked != 3 {
		t.Errorf("report %+v, want one of each of three checked", rep)
	}
	want := map[string]session.State{silent: session.Ended, stuck: session.Failed, ending: session.Ended, beating: session.Idle, provisioning: session.Provisioning}
	reasons := map[string]session.Reason{silent: session.ReasonLost, stuck: session.ReasonTimeout}
	for id, st := range want {
		got, _ := store.Get(t.Context(), id)
		if got.State != st || (reasons[id] != "" && got.Reason != reasons[id]) {
			t.Errorf("%s: %s (%s), want %s %s", id, got.State, got.Reason, st, reasons[id])
		}
	}
	var stopped []string
	for _, s := range rep.Stop {
		stopped = append(stopped, s.ID)
	}
	if len(pub.sent) != 0 {
		t.Errorf("the sweep queued %v: it leaves the stops to its caller", pub.sent)
	}
	slices.Sort(stopped)
	wantStopped := []string{silent, stuck, ending}
	slices.Sort(wantStopped)
	if !slices.Equal(stopped, wantStopped) {
		t.Errorf("stops queued for %v, want %v", stopped, wantStopped)
	}

	// A second sweep finds nothing more; a minute later the idle one, silent
	// since, is lost too.
	if rep, err := svc.Sweep(t.Context()); err != nil || rep.Checked != 0 {
		t.Errorf("second sweep: %+v, %v", rep, err)
	}
	clock = now.Add(time.Minute)
	if rep, err := svc.Sweep(t.Context()); err != nil || rep.Lost != 1 {
		t.Errorf("a minute later: %+v, %v", rep, err)
	}
	if got, _ := store.Get(t.Context(), beating); got.State != session.Ended || got.Reason != session.ReasonLost {
		t.Errorf("the idle one a minute later: %s %s", got.State, got.Reason)
	}
}

func TestWatchShardsSpread(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for range 1600 {
		seen[session.WatchShard(uuid.NewString())]++
	}
	if len(seen) != session.WatchShards {
		t.Fatalf("%d shards used, want %d", len(seen), session.WatchShards)
	}
	for shard, n := range seen {
		if n < 50 || n > 150 {
			t.Errorf("shard %s holds %d of 1600", shard, n)
		}
	}
}
