package devserver_test

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkCreateReady measures create → ready on the local stack with process
// sandboxes, one create per iteration; run with -benchtime=50x (make bench) for
// percentiles over 50 creates.
func BenchmarkCreateReady(b *testing.B) {
	s := start(b)
	var took []time.Duration
	for b.Loop() {
		began := time.Now()
		r := s.create(createBody("Hello"))
		took = append(took, time.Since(began))
		if r.status != http.StatusOK {
			b.Fatalf("create: %d %s", r.status, r.raw)
		}
	}
	slices.Sort(took)
	pct := func(p float64) float64 {
		i := int(p * float64(len(took)-1))
		return float64(took[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}
