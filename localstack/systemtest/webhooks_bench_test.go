package systemtest_test

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/shared/session"
)

// BenchmarkWebhookDelivery measures an agent's state change (its
// state.changed written to its stream, as its sandbox's append writes it)
// to the delivery's arrival at an endpoint on this machine: through the
// events table's stream, the webhooks queue and a signed POST. Then a burst
// of 200 events of one agent, delivered in order: deliveries a second.
func BenchmarkWebhookDelivery(b *testing.B) {
	s := start(b)
	arrived := make(chan string, 1024)
	recv := newBenchReceiver(b, arrived)
	if r := s.call(http.MethodPost, "/api/v1/webhooks", appKey, map[string]any{"url": recv, "events": []string{"agent.state_changed"}}); r.status != http.StatusCreated {
		b.Fatalf("endpoint: %d %s", r.status, r.raw)
	}
	id, _ := s.mustCreate()
	store := s.srv.Env.SessionStore()
	sess, err := store.Get(b.Context(), id)
	if err != nil {
		b.Fatal(err)
	}
	// change appends n state changes; it answers their webhook-ids.
	change := func(n int) map[string]bool {
		evs := make([]session.Event, n)
		for i := range evs {
			evs[i] = session.Event{Type: "state.changed", Data: map[string]any{"state": "working"}}
		}
		out, err := store.AppendEvents(b.Context(), id, sess.Generation, evs)
		if err != nil {
			b.Fatal(err)
		}
		ids := map[string]bool{}
		for _, e := range out {
			ids[fmt.Sprintf("msg_%s_%d", id, e.Seq)] = true
		}
		return ids
	}
	// await waits for every delivery of ids (the agent's own turn's state
	// changes arrive too, and are not counted).
	await := func(ids map[string]bool, within time.Duration) {
		deadline := time.After(within)
		for len(ids) > 0 {
			select {
			case got := <-arrived:
				delete(ids, got)
			case <-deadline:
				b.Fatalf("%d deliveries not there within %s", len(ids), within)
			}
		}
	}
	rec := benchrec.New(b)
	for b.Loop() {
		began := time.Now()
		await(change(1), 30*time.Second)
		rec.Add("state change→delivered", time.Since(began))
	}
	b.StopTimer()
	const burst = 200
	began := time.Now()
	ids := map[string]bool{}
	for range burst / session.MaxEventsPerAppend {
		maps.Copy(ids, change(session.MaxEventsPerAppend))
	}
	await(ids, 60*time.Second)
	rec.Figure("deliveries/s (one agent's burst of 200, in order)", burst/time.Since(began).Seconds())
	rec.Done()
}

// newBenchReceiver serves an endpoint that takes every delivery and tells
// arrived its webhook-id; it answers its URL.
func newBenchReceiver(b *testing.B, arrived chan<- string) string {
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("webhook-id")
		w.WriteHeader(http.StatusNoContent)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/hooks"
}
