package systemtest_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
)

// BenchmarkJobDispatch measures POST /internal/jobs → STARTED (the job
// running: its sandbox, launched by job.run, reported) with 32 orchestrator
// calls at once, each signed; run with -benchtime=2x (make bench) for
// percentiles over 64 jobs. Jobs per second is the batch's jobs over its
// wall time. Each batch's sandboxes are stopped once measured.
func BenchmarkJobDispatch(b *testing.B) {
	const concurrent = 32
	s := start(b)
	o := newOrchestrator(s)
	agent := o.putProfile(b, uuid.NewString())
	rec := benchrec.New(b)
	var wall time.Duration
	jobsDone := 0
	for b.Loop() {
		began := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				step := uuid.NewString()
				start := time.Now()
				r := o.call(http.MethodPost, "/internal/jobs", o.jobBody(agent, step, 1000), step)
				if r.status != http.StatusCreated {
					b.Errorf("create: %d %s", r.status, r.raw)
					return
				}
				id := r.str("id")
				for {
					g := o.call(http.MethodGet, "/internal/jobs/"+id, nil, step)
					if st := g.str("status"); st == "running" || st == "completed" {
						break
					} else if st != "created" {
						b.Errorf("job %s: %s", id, g.raw)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				mu.Lock()
				rec.Add("dispatch", time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		wall += time.Since(began)
		jobsDone += concurrent
		b.StopTimer()
		s.srv.Launcher.StopAll(5 * time.Second)
		b.StartTimer()
	}
	if len(rec.Samples("dispatch")) == 0 {
		b.Fatal("no job started")
	}
	rec.Figure("jobs/s", float64(jobsDone)/wall.Seconds())
	rec.Done()
}
