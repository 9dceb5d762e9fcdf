package devserver_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
)

// BenchmarkToolCallback measures the tool callback route on the local stack, over
// HTTP through the dev gateway, with automation.complete (a synchronous tool:
// the record's conditional put, the run's put, an event, the completion). Each
// iteration is one first call (a new completion_id) and one replay of it; run
// with -benchtime=500x (make bench) for percentiles. After the loop, 32
// concurrent callers make 640 first calls, for throughput.
func BenchmarkToolCallback(b *testing.B) {
	s := start(b, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	body := createBody("bench")
	body["configuration_id"] = "demo-web"
	id, _, sb, _ := s.readySandbox(b, body)
	args := func(n string) map[string]any {
		return map[string]any{"run_id": "run-" + n, "completion_id": "done-" + n, "outcome": "succeeded"}
	}
	var first, replay []time.Duration
	i := 0
	for b.Loop() {
		n := fmt.Sprint(i)
		i++
		began := time.Now()
		r := s.tool(id, sb, "automation.complete", "tc-"+n, args(n))
		first = append(first, time.Since(began))
		if r.status != http.StatusOK || r.body["success"] != true {
			b.Fatalf("first call: %d %s", r.status, r.raw)
		}
		began = time.Now()
		r = s.tool(id, sb, "automation.complete", "tc-"+n, args(n))
		replay = append(replay, time.Since(began))
		if r.headers.Get("Idempotent-Replayed") != "true" {
			b.Fatalf("replay: %d %s", r.status, r.raw)
		}
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(first, 0.50), "first-p50-ms")
	b.ReportMetric(pct(first, 0.99), "first-p99-ms")
	b.ReportMetric(pct(replay, 0.50), "replay-p50-ms")
	b.ReportMetric(pct(replay, 0.99), "replay-p99-ms")

	const callers, each = 32, 20
	var failed atomic.Int32
	var wg sync.WaitGroup
	began := time.Now()
	for c := range callers {
		wg.Go(func() {
			for k := range each {
				n := fmt.Sprintf("t%d-%d", c, k)
				if r := s.tool(id, sb, "automation.complete", "tc-"+n, args(n)); r.status != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d of %d concurrent calls failed", failed.Load(), callers*each)
	}
	b.ReportMetric(float64(callers*each)/time.Since(began).Seconds(), "calls/s@32")
}
