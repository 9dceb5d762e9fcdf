package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// riePackage is the Lambda runtime interface emulator, pinned in this module.
const riePackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// lambda is one function's measurements.
type lambda struct {
	name    string
	zipArch string
	zipSize int64
	inits   []float64 // ms, as the emulator reports INIT REPORT
}

// measureLambdas builds every functions/<name> as make build does and
// measures its zip and its cold init under the runtime interface emulator:
// full runs zip the linux/arm64 build (what is deployed) and start each
// function 10 times; short runs zip the host's build and start each once.
func measureLambdas(root, work string, short bool) ([]lambda, error) {
	mains, err := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	if err != nil || len(mains) == 0 {
		return nil, fmt.Errorf("no functions under %s/functions", root)
	}
	rie := filepath.Join(root, ".cache", "bin", "aws-lambda-rie")
	if _, err := os.Stat(rie); err != nil {
		logf("building the Lambda runtime interface emulator")
		build := exec.Command("go", "build", "-mod=readonly", "-o", rie, riePackage)
		build.Dir, build.Stdout, build.Stderr = filepath.Join(root, "localstack", "tools"), os.Stdout, os.Stderr
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build %s: %w", riePackage, err)
		}
	}
	starts, zipArch := 10, "arm64"
	if short {
		starts, zipArch = 1, runtime.GOARCH
	}
	hostDir := filepath.Join(work, "lambda", runtime.GOARCH)
	if err := buildFunctions(root, runtime.GOARCH, hostDir); err != nil {
		return nil, err
	}
	zipDir := hostDir
	if zipArch != runtime.GOARCH {
		zipDir = filepath.Join(work, "lambda", zipArch)
		if err := buildFunctions(root, zipArch, zipDir); err != nil {
			return nil, err
		}
	}
	var out []lambda
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(m))
		zipped, err := os.Stat(filepath.Join(zipDir, name+".zip"))
		if err != nil {
			return nil, err
		}
		size := zipped.Size()
		l := lambda{name: name, zipArch: zipArch, zipSize: size}
		for range starts {
			ms, err := coldInit(rie, filepath.Join(hostDir, name, "bootstrap"), filepath.Join(root, "data", "platform-guardrails.md"))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			l.inits = append(l.inits, ms)
		}
		logf("lambda %-12s zip %.2f MB (%s), init p50 %.1f ms over %d", name, float64(size)/(1<<20), zipArch, percentile(l.inits, 0.5), len(l.inits))
		out = append(out, l)
	}
	return out, nil
}

// buildFunctions builds every function for linux/arch into dir as make
// build does, with the same command (localstack/cmd/lambdabuild):
// dir/<name>.zip and dir/<name>/bootstrap.
func buildFunctions(root, arch, dir string) error {
	logf("building the functions for linux/%s", arch)
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	build := exec.Command("go", "run", "./localstack/cmd/lambdabuild", "-arch", arch, "-out", dir)
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the functions for %s: %w", arch, err)
	}
	return nil
}

var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// coldInit starts the emulator on bin with the settings the stack gives the
// functions (endpoints that answer nothing: init makes no AWS call), invokes
// it once, and returns the init duration the emulator reports: from the
// bootstrap's exec to its first request for an invocation.
func coldInit(rie, bin, guardrails string) (float64, error) {
	ports, err := freePorts(2)
	if err != nil {
		return 0, err
	}
	api := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", api, "--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", ports[1]), bin)
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "LOG_LEVEL=info",
		"AWS_LAMBDA_FUNCTION_NAME=" + filepath.Base(filepath.Dir(bin)), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_ENDPOINT_URL=http://127.0.0.1:1",
		"RA_ENV=dev", "RA_GUARDRAILS_PATH=" + guardrails,
		"RA_JOBS_QUEUE_URL=http://127.0.0.1:1/q/jobs", "RA_JOBS_DLQ_URL=http://127.0.0.1:1/q/jobs-dlq",
		"RA_TOOLS_QUEUE_URL=http://127.0.0.1:1/q/tools", "RA_TOOLS_DLQ_URL=http://127.0.0.1:1/q/tools-dlq",
		"RA_WEBHOOKS_QUEUE_URL=http://127.0.0.1:1/q/webhooks", "RA_WEBHOOKS_DLQ_URL=http://127.0.0.1:1/q/webhooks-dlq",
		"RA_GATEWAY_URL=http://127.0.0.1:1", "RA_PUBLIC_BASE_URL=http://127.0.0.1:1",
		"RA_ECS_CLUSTER=c", "RA_ECS_TASK_DEFINITION=td", "RA_ECS_SUBNETS=subnet-1",
		"RA_ORCHESTRATOR_ROLE_ARN=arn:aws:iam::000000000000:role/orchestrator",
	}
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := "http://" + api + "/2015-03-31/functions/function/invocations"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			break
		}
		if ctx.Err() != nil || !errors.Is(err, syscall.ECONNREFUSED) {
			return 0, fmt.Errorf("invoke: %w\n%s", err, logs.String())
		}
		time.Sleep(10 * time.Millisecond) // the emulator is still binding its port
	}
	// The emulator's log reaches us through a pipe: it may trail the answer.
	for {
		text := logs.String()
		if m := initReport.FindStringSubmatch(text); m != nil {
			if !strings.Contains(text, "INIT RTDONE(status: success)") {
				return 0, fmt.Errorf("the function's init failed:\n%s", text)
			}
			return strconv.ParseFloat(m[1], 64)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("no init report in the emulator's log:\n%s", text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer func() { _ = ln.Close() }()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
