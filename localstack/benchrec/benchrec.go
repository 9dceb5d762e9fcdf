// Package benchrec records what a benchmark measured: latency samples in
// named series and named figures (a throughput, a ratio). Done reports them
// as the benchmark's metrics and, when RA_BENCH_OUT names a directory, saves
// them there as one JSON file per benchmark, for the report `make bench`
// writes (BENCHMARKS.md and its CDF plot).
//
//	rec := benchrec.New(b)
//	for b.Loop() {
//		began := time.Now()
//		...
//		rec.Add("create", time.Since(began))
//	}
//	rec.Figure("creates/s", n/wall.Seconds())
//	rec.Done()
package benchrec

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// OutEnv names the directory records are saved to; unset, nothing is saved.
const OutEnv = "RA_BENCH_OUT"

// Record is what one benchmark saves: its series in milliseconds, in the
// order they were first added, and its figures with their units.
type Record struct {
	Benchmark string    `json:"benchmark"`
	Series    []Series  `json:"series"`
	Figures   []Figure  `json:"figures"`
	Saved     time.Time `json:"saved"`
}

// Series is one named set of latency samples, in milliseconds.
type Series struct {
	Name    string    `json:"name"`
	Samples []float64 `json:"samples_ms"`
}

// Figure is one named value with its unit ("calls/s", "ratio").
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Recorder collects one benchmark's series and figures.
type Recorder struct {
	b   *testing.B
	rec Record
}

// New returns a recorder for b.
func New(b *testing.B) *Recorder {
	return &Recorder{b: b, rec: Record{Benchmark: b.Name()}}
}

// Add appends d to the series named series.
func (r *Recorder) Add(series string, d time.Duration) {
	r.AddMillis(series, float64(d.Nanoseconds())/1e6)
}

// AddMillis appends a sample already in milliseconds to the series.
func (r *Recorder) AddMillis(series string, ms float64) {
	for i := range r.rec.Series {
		if r.rec.Series[i].Name == series {
			r.rec.Series[i].Samples = append(r.rec.Series[i].Samples, ms)
			return
		}
	}
	r.rec.Series = append(r.rec.Series, Series{Name: series, Samples: []float64{ms}})
}

// Samples returns the series' samples in milliseconds, in the order added.
func (r *Recorder) Samples(series string) []float64 {
	for _, s := range r.rec.Series {
		if s.Name == series {
			return s.Samples
		}
	}
	return nil
}

// Percentile returns the series' q-th percentile (0 < q ≤ 1) in
// milliseconds; 0 for an empty series.
func (r *Recorder) Percentile(series string, q float64) float64 {
	return Percentile(r.Samples(series), q)
}

// Figure records a named value; its name, white space made underscores, is
// its unit in the benchmark's output ("calls/s@32", "warm/floor").
func (r *Recorder) Figure(name string, v float64) {
	r.rec.Figures = append(r.rec.Figures, Figure{Name: name, Value: v})
}

// Done reports each series' p50, p95 and max (as <series>-p50-ms, or p50-ms
// for a benchmark of one series) and each figure as the benchmark's metrics, and saves the record when RA_BENCH_OUT is set.
func (r *Recorder) Done() {
	r.b.Helper()
	for _, s := range r.rec.Series {
		prefix := unit(s.Name) + "-"
		if len(r.rec.Series) == 1 {
			prefix = ""
		}
		r.b.ReportMetric(Percentile(s.Samples, 0.50), prefix+"p50-ms")
		r.b.ReportMetric(Percentile(s.Samples, 0.95), prefix+"p95-ms")
		r.b.ReportMetric(Percentile(s.Samples, 1), prefix+"max-ms")
	}
	for _, f := range r.rec.Figures {
		r.b.ReportMetric(f.Value, unit(f.Name))
	}
	dir := os.Getenv(OutEnv)
	if dir == "" {
		return
	}
	r.rec.Saved = time.Now().UTC()
	raw, err := json.MarshalIndent(r.rec, "", " ")
	if err != nil {
		r.b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName(r.rec.Benchmark)), raw, 0o644); err != nil {
		r.b.Fatal(err)
	}
}

// unit makes name a metric unit: no white space.
func unit(name string) string {
	return strings.Join(strings.Fields(name), "_")
}

// FileName is the file a benchmark's record is saved in: its name with
// subbenchmark slashes and other unsafe characters made underscores.
func FileName(benchmark string) string {
	safe := strings.Map(func(c rune) rune {
		if c == '-' || c == '.' || c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') {
			return c
		}
		return '_'
	}, benchmark)
	return safe + ".json"
}

// Percentile returns the q-th percentile (0 < q ≤ 1) of samples by the
// nearest-rank method: the smallest sample at or above which q of them lie.
// It does not change samples; 0 for none.
func Percentile(samples []float64, q float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(samples))
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
