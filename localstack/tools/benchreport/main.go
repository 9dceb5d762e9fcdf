// Command benchreport runs every benchmark of the repository once, on the
// local stack, and writes one report from that run: BENCHMARKS.md (the
// machine, the versions, the date, the command, and each benchmark's
// percentiles and figures side by side) and a PNG beside it with the latency
// distributions (CDF) of the create paths. It also measures each Lambda
// function: the size of its zip as deployed (linux/arm64) and its cold init
// as Lambda runs it, under the Lambda runtime interface emulator.
//
// The benchmarks save their samples with package localstack/benchrec; this
// command compiles each package's test binary once, runs its benchmarks with
// RA_BENCH_OUT set, and reads what they saved. With -short every benchmark
// runs a few iterations (make test runs it so the benchmarks cannot rot);
// make bench runs the full counts:
//
//	cd localstack/tools && go run ./benchreport -root ../.. [-short] [-out BENCHMARKS.md]
//
// AWS endpoints come from the environment (make wraps it in the bundled
// emulators); Chromium is needed for the browser benchmark.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func main() {
	root := flag.String("root", "../..", "the repository's root")
	short := flag.Bool("short", false, "a few iterations of each benchmark (make test)")
	out := flag.String("out", "BENCHMARKS.md", "the report to write, relative to the root")
	command := flag.String("command", "make bench", "the command named in the report")
	race := flag.Bool("race", false, "build the benchmarks with the race detector (make test's short run: a smoke test, which then links what its tests compiled)")
	flag.Parse()
	if *race && !*short {
		fmt.Fprintln(os.Stderr, "benchreport: -race is for -short runs only: its figures would not be the code's")
		os.Exit(2)
	}
	if err := run(*root, *out, *command, *short, *race); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(root, out, command string, short, race bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	out = filepath.Join(root, out)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	// The samples stay in .cache/bench until the next run; the binaries go.
	work := filepath.Join(root, ".cache", "bench")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	defer func() {
		bins, _ := filepath.Glob(filepath.Join(work, "*.test"))
		for _, b := range append(bins, filepath.Join(work, "lambda")) {
			_ = os.RemoveAll(b)
		}
	}()
	machine := describeMachine(root, command, short)
	records, err := runBenchmarks(root, work, short, race)
	if err != nil {
		return err
	}
	lambdas, err := measureLambdas(root, work, short)
	if err != nil {
		return err
	}
	png := pngBeside(out)
	if err := plotCreate(records, png); err != nil {
		return err
	}
	machine.Took = time.Since(began)
	if err := os.WriteFile(out, []byte(renderReport(machine, records, lambdas, filepath.Base(png))), 0o644); err != nil {
		return err
	}
	logf("wrote %s and %s", out, png)
	return nil
}

var began = time.Now()

// logf prints progress, with the time since the run began.
func logf(format string, a ...any) {
	fmt.Printf("benchreport [%5.1fs]: %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, a...))
}

// pngBeside names the plot after the report: BENCHMARKS.md → benchmarks-create.png.
func pngBeside(report string) string {
	return filepath.Join(filepath.Dir(report), "benchmarks-create.png")
}
