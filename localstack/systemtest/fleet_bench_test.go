package systemtest_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
)

// BenchmarkFleetList measures one page of GET /api/remote_agents (50 items,
// a filter on state) with the app's 100 agents in the table, then with
// 10,000 (of which the page is the newest): the by_tenant index serves the
// page, so its cost must not grow with the table. -benchtime=100x (make
// bench) reads 100 pages at each size; it reports p50 and p95 of each and
// the ratio of the p50s. RA_BENCH_FLEET_SIZE sets the larger table's size
// (the short run in make test uses 1,000).
func BenchmarkFleetList(b *testing.B) {
	large := 10000
	if n, err := strconv.Atoi(os.Getenv("RA_BENCH_FLEET_SIZE")); err == nil && n > 100 {
		large = n
	}
	s := start(b, fakeSandbox())
	tenant := appTenantB(b, s)
	base := time.Now().Add(-time.Hour)
	rec := benchrec.New(b)
	reads := 0
	page := func(series string) {
		began := time.Now()
		r := s.call(http.MethodGet, "/api/remote_agents?limit=50&state=ended", appKey, nil)
		rec.Add(series, time.Since(began))
		if items, _ := r.body["agents"].([]any); r.status != http.StatusOK || len(items) != 50 {
			b.Fatalf("list: %d %.300s", r.status, r.raw)
		}
	}
	b.StopTimer()
	s.putSessions(b, tenant, 100, base, nil)
	b.StartTimer()
	for b.Loop() {
		page("100 sessions")
		reads++
	}
	b.StopTimer()
	s.putSessions(b, tenant, large-100, base.Add(-time.Hour), nil)
	// Another app's agents are in the table too, and never in the page.
	s.putSessions(b, "other-"+uuid.NewString()[:8], 100, base, nil)
	b.StartTimer()
	for range reads {
		page(fmt.Sprintf("%d sessions", large))
	}
	b.StopTimer()
	rec.Figure("large/small", rec.Percentile(fmt.Sprintf("%d sessions", large), 0.5)/rec.Percentile("100 sessions", 0.5))
	rec.Done()
}
