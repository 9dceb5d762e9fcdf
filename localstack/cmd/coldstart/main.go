// Command coldstart measures each Lambda function's cold start on this machine:
// it builds every functions/<name> of a source tree for the host (as make build
// does for Lambda, with -tags lambda.norpc), then starts each binary n times
// against a local Lambda Runtime API and reports how long the process takes,
// from exec to its first request for an invocation, which is when Lambda's init
// phase ends. No AWS call is needed: the queue URLs and the rest of the
// deployment's settings are set as the CDK stack sets them.
//
//	go run ./localstack/cmd/coldstart [-n 20] [-src .]
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 20, "cold starts per function")
	src := flag.String("src", ".", "the source tree whose functions to build")
	flag.Parse()
	if err := run(*src, *n); err != nil {
		fmt.Fprintln(os.Stderr, "coldstart:", err)
		os.Exit(1)
	}
}

func run(src string, n int) error {
	names, err := filepath.Glob(filepath.Join(src, "functions", "*", "main.go"))
	if err != nil || len(names) == 0 {
		return fmt.Errorf("no functions under %s/functions", src)
	}
	out, err := os.MkdirTemp("", "coldstart-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(out) }()
	work, err := filepath.Abs(filepath.Join(src, "data", "platform-guardrails.md"))
	if err != nil {
		return err
	}
	fmt.Printf("%-14s %9s %9s %9s %9s\n", "function", "size MB", "p50 ms", "p95 ms", "max ms")
	for _, mainFile := range names {
		name := filepath.Base(filepath.Dir(mainFile))
		bin := filepath.Join(out, name)
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./functions/"+name)
		build.Dir, build.Stderr, build.Env = src, os.Stderr, append(os.Environ(), "CGO_ENABLED=0")
		if err := build.Run(); err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
		info, err := os.Stat(bin)
		if err != nil {
			return err
		}
		var times []time.Duration
		for range n {
			d, err := coldStart(bin, work)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			times = append(times, d)
		}
		slices.Sort(times)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fmt.Printf("%-14s %9.2f %9.1f %9.1f %9.1f\n", name, float64(info.Size())/(1<<20),
			ms(times[len(times)/2]), ms(times[(len(times)*95-1)/100]), ms(times[len(times)-1]))
	}
	return nil
}

// coldStart runs bin once and returns the time from exec to its first
// GET /2018-06-01/runtime/invocation/next.
func coldStart(bin, guardrails string) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	ready := make(chan time.Time, 1)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			select {
			case ready <- time.Now():
			default:
			}
			<-r.Context().Done() // hold it: no invocation comes
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	cmd := exec.Command(bin)
	cmd.Env = []string{
		"AWS_LAMBDA_RUNTIME_API=" + ln.Addr().String(),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_ENDPOINT_URL=http://127.0.0.1:1",
		"RA_ENV=dev", "RA_GUARDRAILS_PATH=" + guardrails,
		"RA_JOBS_QUEUE_URL=http://127.0.0.1:1/q/jobs", "RA_JOBS_DLQ_URL=http://127.0.0.1:1/q/jobs-dlq",
		"RA_TOOLS_QUEUE_URL=http://127.0.0.1:1/q/tools", "RA_TOOLS_DLQ_URL=http://127.0.0.1:1/q/tools-dlq",
		"RA_GATEWAY_URL=http://127.0.0.1:1", "RA_PUBLIC_BASE_URL=http://127.0.0.1:1",
		"RA_ECS_CLUSTER=c", "RA_ECS_TASK_DEFINITION=td", "RA_ECS_SUBNETS=subnet-1",
	}
	cmd.Dir = filepath.Dir(guardrails)
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case at := <-ready:
		_ = cmd.Process.Kill()
		<-exited
		return at.Sub(started), nil
	case <-exited:
		return 0, fmt.Errorf("exited before its first invocation: %w", waitErr)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		return 0, ctx.Err()
	}
}
