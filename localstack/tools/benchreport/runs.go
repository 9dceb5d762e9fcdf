package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// benchmark is one benchmark of the report: where it is, how many
// iterations each mode runs, and how the report presents it.
type benchmark struct {
	pkg, name    string
	full         int
	env          []string
	title, about string
}

// benchmarks is every benchmark the report runs, in the report's order.
var benchmarks = []benchmark{
	{pkg: "localstack/systemtest", name: "BenchmarkCreateReadyPool", full: 30,
		title: "Create → ready: cold, warm, the floor",
		about: "One create of each per iteration. Cold: an agent type with no pool, a sandbox process started for the create. Warm: a type with a pool of 2, the sandbox claimed from it. Floor: the DynamoDB and SQS round trips on the warm path, issued raw with the SDK against the same emulators in the same order (at once where the path makes them at once): no create making those calls can be faster on this stack. Floor-min: the 17 round trips a warm create could not do without (no quota, no exactly-once events, no token check per sandbox request). The document checks the tests run on every answer are off in benchmarks."},
	{pkg: "localstack/systemtest", name: "BenchmarkCreateReady", full: 50,
		title: "Create → ready: the default type",
		about: "POST /api/remote_agents until it answers 200 with a ready agent, with the sandbox's tmux session; each agent is shut down once measured."},
	{pkg: "localstack/systemtest", name: "BenchmarkCreateReadyWorkspace", full: 20,
		title: "Create → ready with a workspace",
		about: "No repository, a small repository cloned over HTTP on loopback, and that repository with one setup command."},
	{pkg: "localstack/systemtest", name: "BenchmarkToolCallback", full: 500,
		title: "Tool callback",
		about: "automation.complete through the gateway: a first call (new completion id) and its replay per iteration; then 32 concurrent callers make 640 first calls for throughput."},
	{pkg: "localstack/systemtest", name: "BenchmarkViewerPush1", full: 100,
		title: "Events and reply pieces → browser, 1 viewer",
		about: "The embed view in headless Chromium as the agent's one viewer, on the push channel: a sandbox's POST /sandbox/{id}/events to the event's arrival in the page (append→browser), and its POST /sandbox/{id}/deltas of a piece of its reply to the piece's arrival (delta→browser: what streaming adds to the model's own pace). Each is pushed by the request that stores (or takes) it; nothing polls."},
	{pkg: "localstack/systemtest", name: "BenchmarkViewerPush50", full: 100,
		title: "Events and reply pieces → browser, 50 viewers",
		about: "The same with 49 more viewers of the agent on the push channel (WebSocket clients reading every frame): every append and every piece is posted to 50 connections at once."},
	{pkg: "localstack/systemtest", name: "BenchmarkViewerPushAfterQuiet", full: 5,
		title: "Event → browser after 30 s of quiet",
		about: "An append to the page after 30 s in which nothing happened to the agent (the short run: 1 s). The event stream the page read before read the table once a second once idle, so its first event after a quiet spell waited up to a second; pushed, it waits for nothing."},
	{pkg: "localstack/systemtest", name: "BenchmarkMessageToSandbox", full: 50,
		title: "Message → sandbox",
		about: "POST /messages to the sandbox starting the turn that answers it (pushed; the inbox poll is an hour apart)."},
	{pkg: "localstack/systemtest", name: "BenchmarkJobDispatch", full: 2,
		title: "Job dispatch",
		about: "POST /internal/jobs → the job STARTED (its started_at), 32 signed orchestrator calls at once per iteration (the short run: 4), cold (each job launches its sandbox) and warm (a profile with a pool of 32: each claims an idle one)."},
	{pkg: "localstack/systemtest", name: "BenchmarkFleetList", full: 100, env: []string{"RA_BENCH_FLEET_SIZE=10000"},
		title: "Fleet list page",
		about: "One page of GET /api/remote_agents (50 items, filtered on state) with the app's 100 agents in the table, then with 10,000 (the short run: 1,000) and another app's 100."},
	{pkg: "localstack/systemtest", name: "BenchmarkModelGateway", full: 200,
		title: "Model gateway",
		about: "One streamed Anthropic call through the gateway and one direct to the same local server of Anthropic's wire format, in alternating order; added is the difference, call by call."},
	{pkg: "localstack/systemtest", name: "BenchmarkAdmission", full: 300,
		title: "Admission: quotas and spend caps",
		about: "What the checks add where they are made, on the stack's DynamoDB, in alternating order. Create: a session written alone (a conditional put) against one admitted within the live and minute quotas (one transaction with both counters). Model call: its usage and its app's spend of the day and month settled without caps (one transaction) against a call also held on its session's, its app's day's and month's caps before it starts (a second transaction). Added is the difference, iteration by iteration."},
	{pkg: "localstack/systemtest", name: "BenchmarkWorkspaceTool", full: 20,
		title: "Workspace tool round trip",
		about: "An app's read of a workspace file: the request through the agent's inbox to the real sandbox and its result back."},
	{pkg: "localstack/systemtest", name: "BenchmarkWebhookDelivery", full: 50,
		title: "Webhook delivery",
		about: "An agent's state change (its state.changed written to its stream, as its sandbox's append writes it) to the signed delivery's arrival at an endpoint on this machine: the events table's stream, a trigger on the webhooks queue, the delivery run, the POST. Then one agent's burst of 200 events, delivered in order: deliveries a second."},
	{pkg: "localstack/systemtest", name: "BenchmarkPauseResume", full: 10,
		title: "Pause and resume",
		about: "A new agent per iteration whose workspace was just filled with random bytes (so the checkpoint uploads all of it); pause until the agent is paused (its turn stopped, its checkpoint written, every chunk verified, committed), resume until it is ready again from that checkpoint. 10 MB: resumed on a cold sandbox (a type with no pool), and on a warm one (a type with a pool of 1, refilled off the clock). 1 GB (the short run: 64 MB): pause, resume, then a second pause of the same unchanged workspace, which uploads only its manifest. S3 is gofakes3 in memory on loopback, which keeps no checksum: the commit reads every new chunk back to verify it, as it would not on S3."},
	{pkg: "localstack/systemtest", name: "BenchmarkE2B", full: 20,
		title: "The E2B-compatible sandbox API",
		about: "On the wire the E2B SDKs speak (docs/e2b.md), per iteration: POST /e2b/v2/sandboxes of a type with a warm pool of 1 (refilled off the clock) to the first output of its first command (process.Start of `echo`) through the sandbox proxy; a command's start to its first output through the proxy and straight to the sandbox's envd socket; an octet-stream upload and a download of 100 MB of random bytes (the short run: 16 MB) through the proxy, uncompressed."},
	{pkg: "shared/egressproxy", name: "BenchmarkEgressProxy", full: 500,
		title: "Egress proxy",
		about: "One request of a sandbox on a new connection each (as a command's curl makes it), to a local server, in alternating order: HTTP direct and through the proxy; HTTPS direct, through a CONNECT tunnel passed through untouched, and through the proxy terminating TLS with the sandbox's authority to inject a header (the proxy keeps its own connection to the server: the server's RSA handshake is not paid again). Added is the difference with direct, request by request."},
	{pkg: "sandbox/agentfile", name: "BenchmarkParse1000Lines", full: 2000,
		title: "Agentfile parse",
		about: "Parse and validate an Agentfile of 1,000 lines."},
	{pkg: "shared/markdown", name: "BenchmarkDeepQuotes", full: 200,
		title: "Markdown of an agent message",
		about: "Render and sanitise an agent message once, as it is appended: 30,000 '>' (seconds before nesting was bounded) and a 30 KB reply."},
	{pkg: "sandbox/workflow", name: "BenchmarkToolLoopStep", full: 20000,
		title: "Tool-loop overhead per step",
		about: "The workflow engine's own cost for one goal of one tool turn with a scripted model and an in-process tool: no network, only the loop."},
}

// record is what a benchmark saved (localstack/benchrec's JSON).
type record struct {
	Benchmark string `json:"benchmark"`
	Series    []struct {
		Name    string    `json:"name"`
		Samples []float64 `json:"samples_ms"`
	} `json:"series"`
	Figures []struct {
		Name  string  `json:"name"`
		Value float64 `json:"value"`
	} `json:"figures"`
}

// result is one benchmark's records: one per benchmark, or one per sub-benchmark.
type result struct {
	benchmark
	records []record
}

// shortRuns is how many iterations each benchmark makes in the short run,
// where one invocation per package runs them all.
const shortRuns = 2

// invocation is one run of a package's test binary: its benchmarks, each
// for n iterations.
type invocation struct {
	pkg   string
	names []string
	n     int
	env   []string
}

// invocations are the runs of the test binaries: one per benchmark with its
// own count in a full run; one per package in a short run, which spares a
// test binary's start (building the agent, checking the emulators) per
// benchmark.
func invocations(short bool) []invocation {
	var out []invocation
	for _, b := range benchmarks {
		if !short {
			out = append(out, invocation{pkg: b.pkg, names: []string{b.name}, n: b.full, env: b.env})
			continue
		}
		if len(out) == 0 || out[len(out)-1].pkg != b.pkg {
			out = append(out, invocation{pkg: b.pkg, n: shortRuns, env: []string{"RA_BENCH_FLEET_SIZE=1000", "RA_BENCH_JOBS=4", "RA_BENCH_CHECKPOINT_LARGE_MB=64", "RA_BENCH_E2B_FILE_MB=16", "RA_BENCH_QUIET_SECONDS=1"}})
		}
		out[len(out)-1].names = append(out[len(out)-1].names, b.name)
	}
	return out
}

// runBenchmarks compiles each package's test binary once (with the race
// detector if race), runs the benchmarks with RA_BENCH_OUT set, and reads
// what each saved.
func runBenchmarks(root, work string, short, race bool) ([]result, error) {
	bins := map[string]string{}
	dir := filepath.Join(work, "records")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, inv := range invocations(short) {
		bin, ok := bins[inv.pkg]
		if !ok {
			bin = filepath.Join(work, strings.ReplaceAll(inv.pkg, "/", "_")+".test")
			logf("building %s's tests", inv.pkg)
			// Built as the functions' zips are (no cgo, -trimpath), from the
			// same cache; a race build as make test's tests are, from theirs.
			build := exec.Command("go", "test", "-c", "-trimpath", "-o", bin, "./"+inv.pkg)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if race {
				build = exec.Command("go", "test", "-c", "-race", "-o", bin, "./"+inv.pkg)
				build.Env = os.Environ()
			}
			build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
			if err := build.Run(); err != nil {
				return nil, fmt.Errorf("build %s: %w", inv.pkg, err)
			}
			bins[inv.pkg] = bin
		}
		pattern := "^(" + strings.Join(inv.names, "|") + ")$"
		cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", fmt.Sprintf("%dx", inv.n), "-test.count", "1")
		cmd.Dir, cmd.Stdout, cmd.Stderr = filepath.Join(root, inv.pkg), os.Stdout, os.Stderr
		cmd.Env = append(append(os.Environ(), "RA_BENCH_OUT="+dir), inv.env...)
		logf("%s %s × %d", inv.pkg, strings.Join(inv.names, " "), inv.n)
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s %s: %w", inv.pkg, pattern, err)
		}
	}
	var results []result
	for _, b := range benchmarks {
		recs, err := readRecords(dir, b.name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		results = append(results, result{benchmark: b, records: recs})
	}
	return results, nil
}

// readRecords reads the records benchmark name saved, its own or its
// sub-benchmarks'; a benchmark that saved none, or a series with no sample,
// is an error: the report would be empty.
func readRecords(dir, name string) ([]record, error) {
	files, err := filepath.Glob(filepath.Join(dir, name+"_*.json"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, name+".json")); err == nil {
		files = append(files, filepath.Join(dir, name+".json"))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("saved no record in %s", dir)
	}
	var recs []record
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r record
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(r.Series) == 0 {
			return nil, fmt.Errorf("%s: no series", r.Benchmark)
		}
		for _, s := range r.Series {
			if len(s.Samples) == 0 {
				return nil, fmt.Errorf("%s: series %q has no sample", r.Benchmark, s.Name)
			}
		}
		recs = append(recs, r)
	}
	return recs, nil
}
