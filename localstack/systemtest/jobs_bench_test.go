package systemtest_test

import (
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// BenchmarkJobDispatch measures POST /internal/jobs → STARTED (the job
// running: its sandbox reported) with 32 orchestrator calls at once, each
// signed (RA_BENCH_JOBS sets how many), two ways per iteration: cold (a profile without a pool: each job
// launches its sandbox) and warm (a profile with a pool of 32, refilled
// between iterations off the clock: each job claims an idle sandbox). Run
// with -benchtime=2x (make bench) for percentiles over 64 jobs each. A job
// is timed from its POST to its started_at (the server's clock: this
// machine's); jobs per second is a batch's jobs over the time from its
// first POST to its last job's start. Each batch's sandboxes are stopped
// once measured.
func BenchmarkJobDispatch(b *testing.B) {
	concurrent := 32
	if n, err := strconv.Atoi(os.Getenv("RA_BENCH_JOBS")); err == nil && n > 0 {
		concurrent = n // make test's short run: 4
	}
	s := start(b, withoutRefillOnClaim())
	o := newOrchestrator(s)
	cold := o.putProfile(b, uuid.NewString())
	warm := uuid.NewString()
	if r := o.call(http.MethodPut, "/internal/agents/"+warm, map[string]any{"name": "Warm", "agent_level": "L1", "llm_provider": "scripted",
		"llm_model": "scripted", "max_tokens": 4096, "allowed_skills": []string{"read", "write"}, "warm_pool_size": concurrent}, uuid.NewString()); r.status != http.StatusOK {
		b.Fatalf("put profile: %d %s", r.status, r.raw)
	}
	idle := func() int {
		list, err := s.poolStore().List(b.Context(), registry.Platform, job.PoolType(warm))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, sb := range list {
			if sb.State == pool.Idle {
				n++
			}
		}
		return n
	}
	rec := benchrec.New(b)
	wall := map[string]time.Duration{}
	batch := func(series, agent string) {
		began := time.Now()
		var last time.Time // the batch's last job started then
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				step := uuid.NewString()
				start := time.Now()
				r := o.call(http.MethodPost, "/internal/jobs", o.jobBody(agent, step, 20000), step)
				if r.status != http.StatusCreated {
					b.Errorf("create: %d %s", r.status, r.raw)
					return
				}
				id := r.str("id")
				// The job's own started_at (this machine's clock) is when it
				// ran: polled once a second, so that 32 pollers do not load
				// the server they measure (each read is two DynamoDB reads).
				var g reply
				for {
					g = o.call(http.MethodGet, "/internal/jobs/"+id, nil, step)
					if g.str("started_at") != "" {
						break
					} else if st := g.str("status"); st != "created" {
						b.Errorf("job %s: %s without starting", id, g.raw)
						return
					}
					time.Sleep(time.Second)
				}
				started, err := time.Parse(time.RFC3339Nano, g.str("started_at"))
				if err != nil {
					b.Errorf("job %s: started_at: %v (%s)", id, err, g.raw)
					return
				}
				mu.Lock()
				rec.Add(series, started.Sub(start))
				if started.After(last) {
					last = started
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		wall[series] += last.Sub(began)
	}
	for b.Loop() {
		batch("cold", cold)
		b.StopTimer()
		s.srv.Launcher.StopAll(5 * time.Second)
		s.sweep()
		eventually(b, 5*time.Minute, "the warm profile's pool at its size", func() bool { return idle() == concurrent })
		b.StartTimer()
		batch("warm", warm)
		b.StopTimer()
		s.srv.Launcher.StopAll(5 * time.Second)
		b.StartTimer()
	}
	for _, series := range []string{"cold", "warm"} {
		n := len(rec.Samples(series))
		if n == 0 {
			b.Fatalf("no %s job started", series)
		}
		rec.Figure(series+" jobs/s", float64(n)/wall[series].Seconds())
	}
	rec.Figure("warm/cold", rec.Percentile("warm", 0.5)/rec.Percentile("cold", 0.5))
	rec.Done()
}
