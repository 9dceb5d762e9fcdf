package benchrec_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
)

func TestPercentileIsNearestRank(t *testing.T) {
	samples := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 5}, {0.95, 10}, {0.9, 9}, {0.1, 1}, {1, 10}, {0.01, 1}} {
		if got := benchrec.Percentile(samples, c.q); got != c.want {
			t.Errorf("p%v = %v, want %v", c.q*100, got, c.want)
		}
	}
	if samples[0] != 5 {
		t.Error("Percentile sorted its argument")
	}
	if benchrec.Percentile(nil, 0.5) != 0 {
		t.Error("empty series")
	}
}

func TestFileNameIsSafe(t *testing.T) {
	if got := benchrec.FileName("BenchmarkX/sub case/../y"); got != "BenchmarkX_sub_case_.._y.json" {
		t.Errorf("FileName = %q", got)
	}
}

// TestRecorderSavesWhereTold runs a benchmark (a Recorder needs a *testing.B)
// and checks that Done reports and writes its series and figures where
// RA_BENCH_OUT says.
func TestRecorderSavesWhereTold(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(benchrec.OutEnv, dir)
	res := testing.Benchmark(func(b *testing.B) {
		rec := benchrec.New(b)
		for range 3 { // not b.N: testing.Benchmark would run it for a second
			rec.Add("a", 2*time.Millisecond)
			rec.AddMillis("b c", 3)
		}
		rec.Figure("ops/s", 42)
		rec.Done()
	})
	if res.Extra["a-p50-ms"] != 2 || res.Extra["b_c-max-ms"] != 3 || res.Extra["ops/s"] != 42 {
		t.Errorf("metrics %v", res.Extra)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("saved %v", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec benchrec.Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Series) != 2 || rec.Series[0].Name != "a" || len(rec.Series[0].Samples) == 0 || rec.Series[0].Samples[0] != 2 ||
		len(rec.Figures) != 1 || rec.Figures[0].Value != 42 {
		t.Errorf("record %+v", rec)
	}
}
