package devserver_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkFleetList measures one page of GET /api/remote_agents (50 items,
// a filter on state) with the app's 100 agents in the table, then with
// 10,000 (of which the page is the newest): the by_tenant index serves the
// page, so its cost must not grow with the table. -benchtime=100x (make
// bench) reads 100 pages at each size; it prints p50 and p95 of each and the
// ratio of the p50s.
func BenchmarkFleetList(b *testing.B) {
	s := start(b, fakeSandbox())
	tenant := appTenantB(b, s)
	base := time.Now().Add(-time.Hour)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := func(ds []time.Duration, q float64) time.Duration {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[int(q*float64(len(ds)-1))]
	}
	var small, large []time.Duration
	page := func() time.Duration {
		began := time.Now()
		r := s.call(http.MethodGet, "/api/remote_agents?limit=50&state=ended", appKey, nil)
		took := time.Since(began)
		if items, _ := r.body["agents"].([]any); r.status != http.StatusOK || len(items) != 50 {
			b.Fatalf("list: %d %.300s", r.status, r.raw)
		}
		return took
	}
	b.StopTimer()
	s.putSessions(b, tenant, 100, base, nil)
	b.StartTimer()
	for b.Loop() {
		small = append(small, page())
	}
	b.StopTimer()
	s.putSessions(b, tenant, 9900, base.Add(-time.Hour), nil)
	// Another app's agents are in the table too, and never in the page.
	s.putSessions(b, "other-"+uuid.NewString()[:8], 100, base, nil)
	b.StartTimer()
	for range len(small) {
		large = append(large, page())
	}
	b.ReportMetric(ms(p(small, 0.5)), "p50-100-ms")
	b.ReportMetric(ms(p(large, 0.5)), "p50-10000-ms")
	b.ReportMetric(float64(p(large, 0.5))/float64(p(small, 0.5)), "ratio")
	var t strings.Builder
	fmt.Fprintf(&t, "\nfleet list page (50 of the app's agents) over %d reads each\n%-16s %9s %9s\n", len(small), "sessions", "p50 ms", "p95 ms")
	fmt.Fprintf(&t, "%-16s %9.1f %9.1f\n%-16s %9.1f %9.1f\n", "100", ms(p(small, 0.5)), ms(p(small, 0.95)), "10,000", ms(p(large, 0.5)), ms(p(large, 0.95)))
	fmt.Fprintf(&t, "10,000 ÷ 100 (p50): %.2f\n", float64(p(large, 0.5))/float64(p(small, 0.5)))
	b.Log(t.String())
}
