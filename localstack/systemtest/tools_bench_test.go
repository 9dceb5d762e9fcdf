package systemtest_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
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
	rec := benchrec.New(b)
	i := 0
	for b.Loop() {
		n := fmt.Sprint(i)
		i++
		began := time.Now()
		r := s.tool(id, sb, "automation.complete", "tc-"+n, args(n))
		rec.Add("first", time.Since(began))
		if r.status != http.StatusOK || r.body["success"] != true {
			b.Fatalf("first call: %d %s", r.status, r.raw)
		}
		began = time.Now()
		r = s.tool(id, sb, "automation.complete", "tc-"+n, args(n))
		rec.Add("replay", time.Since(began))
		if r.headers.Get("Idempotent-Replayed") != "true" {
			b.Fatalf("replay: %d %s", r.status, r.raw)
		}
	}
	b.StopTimer()
	rec.Figure("first-p99-ms", rec.Percentile("first", 0.99))
	rec.Figure("replay-p99-ms", rec.Percentile("replay", 0.99))

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
	rec.Figure("calls/s@32", float64(callers*each)/time.Since(began).Seconds())
	rec.Done()
}
