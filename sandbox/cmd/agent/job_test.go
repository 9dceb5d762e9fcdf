package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

const testJobID = "7d1e5f3a-9c2b-4e8d-a6f0-1b3c5d7e9f20"

// jobPlatform plays the platform's side of the sandbox channel for one job
// sandbox: it serves the job's spec, presigns uploads to its own blob route
// and keeps what is uploaded and reported.
type jobPlatform struct {
	spec sandboxwire.Spec
	url  string
	// cancelled: heartbeats answer stop once the sandbox reported working
	// (the job cancelled) and, if cancelAfter names one, once that file of
	// the job's directory exists (what the job did before it was stopped).
	cancelled   bool
	cancelAfter string
	jobDir      string
	// startFails: the job is expected not to start (the agent exits 1);
	// reused: its job directory is there already.
	startFails, reused bool
	// modelStatus, if set, is what the platform's model gateway answers
	// every model call (Anthropic's error body), modelCalls how many came.
	modelStatus, modelCalls int

	mu      sync.Mutex
	beats   []sandboxwire.HeartbeatReport
	reports []sandboxwire.StatusReport
	uploads []sandboxwire.UploadsRequest
	blobs   map[string][]byte
	events  []string
}

func (p *jobPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if key, ok := strings.CutPrefix(r.URL.Path, "/blob/"); ok && r.Method == http.MethodPut {
		if r.Header.Get("X-Signed") != "yes" {
			http.Error(w, "unsigned", http.StatusForbidden)
			return
		}
		body, _ := io.ReadAll(r.Body)
		p.blobs[key] = body
		return
	}
	if r.Header.Get("Authorization") != "Bearer rsb_job" {
		http.Error(w, `{"error_code":"invalid_token"}`, http.StatusUnauthorized)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/sandbox/s1/model/") && p.modelStatus != 0 {
		p.modelCalls++
		w.Header().Set("Retry-After", "0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(p.modelStatus)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit."}}`)
		return
	}
	var out any = sandboxwire.Orders{State: sandboxwire.Working}
	switch strings.TrimPrefix(r.URL.Path, "/sandbox/s1/") {
	case sandboxwire.RouteSpec:
		out = p.spec
	case sandboxwire.RouteStatus:
		var in sandboxwire.StatusReport
		_ = json.NewDecoder(r.Body).Decode(&in)
		p.reports = append(p.reports, in)
	case sandboxwire.RouteHeartbeat:
		var in sandboxwire.HeartbeatReport
		_ = json.NewDecoder(r.Body).Decode(&in)
		p.beats = append(p.beats, in)
		// With cancelAfter, the stop waits for a heartbeat that reports the
		// job's output file too (its progress).
		progressed := p.cancelAfter == "" || (in.Usage != nil && in.Usage.Files > 0)
		if p.cancelled && slices.ContainsFunc(p.reports, func(r sandboxwire.StatusReport) bool { return r.State == sandboxwire.Working }) && p.begun() && progressed {
			out = sandboxwire.Orders{Stop: true, State: sandboxwire.Ending}
		}
	case sandboxwire.RouteEvents:
		var in sandboxwire.EventsRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		for _, e := range in.Events {
			p.events = append(p.events, e.Type)
		}
		out = sandboxwire.EventsResponse{FirstSeq: 1, LastSeq: 1}
	case sandboxwire.RouteUploads:
		var in sandboxwire.UploadsRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		p.uploads = append(p.uploads, in)
		res := sandboxwire.UploadsResponse{}
		for _, f := range in.Files {
			key := sandboxwire.JobUploadKey(testJobID, f.Path)
			res.Uploads = append(res.Uploads, sandboxwire.Upload{Path: f.Path, Key: key, URL: p.url + "/blob/" + key, Headers: map[string]string{"X-Signed": "yes"}})
		}
		out = res
	default:
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// begun reports whether the file cancelAfter names is in the job's
// directory (true if it names none).
func (p *jobPlatform) begun() bool {
	if p.cancelAfter == "" {
		return true
	}
	_, err := os.Stat(filepath.Join(p.jobDir, p.cancelAfter))
	return err == nil
}

// runJob runs the agent binary (this test binary, see TestMain) in job mode
// against a platform serving job with the scripted model's script, and
// returns the platform once the agent has exited.
func runJob(t *testing.T, job sandboxwire.JobSpec, script string) (*jobPlatform, string) {
	t.Helper()
	return runJobOn(t, &jobPlatform{}, job, script)
}

func runJobOn(t *testing.T, p *jobPlatform, job sandboxwire.JobSpec, script string) (*jobPlatform, string) {
	t.Helper()
	p.blobs, p.spec = map[string][]byte{}, sandboxwire.Spec{SessionID: "s1", Generation: 1,
		Guardrails: sandboxwire.Guardrails{Content: "# Rules\nStay in your job.", Hash: strings.Repeat("b", sandboxwire.GuardrailsHashLen)},
		Job:        &job}
	srv := httptest.NewServer(p)
	defer srv.Close()
	p.url = srv.URL
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "script.jsonl")
	if err := os.WriteFile(scriptPath, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "agent-space")
	p.mu.Lock()
	p.jobDir = filepath.Join(root, job.JobID)
	p.mu.Unlock()
	if p.reused {
		if err := os.MkdirAll(filepath.Join(root, job.JobID, "output"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "sandbox")
	cmd.Env = append(sandboxwire.HostEnv(os.Environ()),
		"PROLIFERATE_SESSION_ID=s1", "PROLIFERATE_GATEWAY_URL="+srv.URL, "SANDBOX_MCP_AUTH_TOKEN=rsb_job",
		"RA_WORKSPACE="+dir, "RA_JOB_ROOT="+root, "RA_ENV_FILE="+filepath.Join(dir, "env.json"), "RA_NO_TMUX=1",
		"RA_LLM_SCRIPT="+scriptPath, "RA_HEARTBEAT_SECONDS=0.2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// The agent exits 0 once it reported its job's end, 1 when the job could
	// not start (reported failed too).
	if err := cmd.Run(); err != nil && (!p.startFails || cmd.ProcessState.ExitCode() != 1) {
		t.Fatalf("agent: %v\n%s", err, stderr.String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reports) < 1 {
		t.Fatalf("no status report; agent said:\n%s", stderr.String())
	}
	return p, filepath.Join(root, job.JobID)
}

func scriptedJob(limit int64, skills ...string) sandboxwire.JobSpec {
	return sandboxwire.JobSpec{JobID: testJobID, TokenLimit: limit,
		InputData: json.RawMessage(`{"topic":"otters","files":{"brief.md":"Write about otters."}}`),
		Profile: sandboxwire.JobProfile{AgentID: "a1", Name: "writer", Level: "L1", Provider: "scripted", Model: "scripted",
			MaxTokens: 100, Temperature: 0.2, AllowedSkills: skills}}
}

// final returns the last status report, which must carry a job report.
func final(t *testing.T, p *jobPlatform) sandboxwire.StatusReport {
	t.Helper()
	last := p.reports[len(p.reports)-1]
	if last.Job == nil {
		t.Fatalf("last report %+v has no job report", last)
	}
	return last
}

// checkUploaded checks that every file the job report names was uploaded
// with the size and SHA-256 reported, and returns the contents by path.
func checkUploaded(t *testing.T, p *jobPlatform, rep *sandboxwire.JobReport) map[string]string {
	t.Helper()
	got := map[string]string{}
	files := slices.Clone(rep.Outputs)
	if rep.Log != nil {
		files = append(files, *rep.Log)
	}
	for _, f := range files {
		body, ok := p.blobs[f.Key]
		sum := sha256.Sum256(body)
		if !ok || int64(len(body)) != f.SizeBytes || hex.EncodeToString(sum[:]) != f.SHA256 || f.Key != sandboxwire.JobUploadKey(testJobID, f.Path) {
			t.Errorf("file %+v: uploaded %v, %d bytes", f, ok, len(body))
		}
		got[f.Path] = string(body)
	}
	return got
}

// TestJobWritesTwoOutputs: the agent binary in job mode lays out the job
// directory, reports ready then working, runs the profile's scripted model
// (which reads its input, tries an escape, and writes two files to
// output/), uploads both and the log, and reports ended with the job report.
func TestJobWritesTwoOutputs(t *testing.T) {
	script := `{"text":"reading","tool_calls":[{"name":"read","args":{"path":"input/input.json"}},{"name":"read","args":{"path":"input/brief.md"}},{"name":"read","args":{"path":"../../env.json"}}]}
{"text":"writing","tool_calls":[{"name":"write","args":{"path":"output/report.md","content":"# Otters\nThey hold hands."}},{"name":"write","args":{"path":"output/data/facts.json","content":"{\"otters\":13}"}},{"name":"write","args":{"path":"input/brief.md","content":"changed"}}]}
{"text":"Done: output/report.md and output/data/facts.json."}
`
	p, dir := runJob(t, scriptedJob(100000, "read", "write", "bash", "web_fetch"), script)
	if len(p.reports) != 3 || p.reports[0].State != sandboxwire.Ready || p.reports[0].GuardrailsHash != strings.Repeat("b", 64) || p.reports[1].State != sandboxwire.Working {
		t.Errorf("reports %+v: want ready, working, then the end", p.reports)
	}
	last := final(t, p)
	rep := last.Job
	if last.State != sandboxwire.Ended || rep.Outcome != sandboxwire.JobCompleted || rep.Failure != nil || rep.TokensUsed <= 0 {
		t.Fatalf("final report %+v, job %+v", last, rep)
	}
	if len(rep.Outputs) != 2 || rep.Outputs[0].Path != "output/data/facts.json" || rep.Outputs[1].Path != "output/report.md" || rep.Log == nil || rep.Log.Path != sandboxwire.JobLogPath {
		t.Fatalf("outputs %+v log %+v", rep.Outputs, rep.Log)
	}
	got := checkUploaded(t, p, rep)
	if got["output/report.md"] != "# Otters\nThey hold hands." || got["output/data/facts.json"] != `{"otters":13}` {
		t.Errorf("uploaded %q", got)
	}
	if len(p.uploads) != 1 || p.uploads[0].Tool != sandboxwire.JobUploads || p.uploads[0].ToolCallID != testJobID {
		t.Errorf("uploads requests %+v", p.uploads)
	}
	// The log holds the run: the input read, the refused escapes, the end.
	log := got[sandboxwire.JobLogPath]
	for _, want := range []string{`"event":"job_started"`, `"tools":["read","write","bash"]`, "Write about otters.", `"event":"policy_violation"`, `"event":"job_completed"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if n := strings.Count(log, `"event":"policy_violation"`); n != 2 {
		t.Errorf("%d policy violations logged, want 2 (the read out, the write into input/)", n)
	}
	if !slices.Contains(p.events, sandboxwire.TypeToolCall) || !slices.Contains(p.events, sandboxwire.TypeAgentMessage) {
		t.Errorf("events %v", p.events)
	}
	// input/ is as the orchestrator gave it; output/ is read-only.
	if raw, _ := os.ReadFile(filepath.Join(dir, "input", "brief.md")); string(raw) != "Write about otters." {
		t.Errorf("input/brief.md is %q", raw)
	}
	if info, err := os.Stat(filepath.Join(dir, "output", "report.md")); err != nil || info.Mode().Perm() != 0o444 {
		t.Errorf("output/report.md: %v %v", info, err)
	}
}

// TestJobStopsAtItsTokenLimit: once no room for a reply remains of the
// job's token limit, the next call is never made; the job fails with
// token_limit and keeps what it wrote.
func TestJobStopsAtItsTokenLimit(t *testing.T) {
	script := `{"text":"writing","tool_calls":[{"name":"write","args":{"path":"output/partial.md","content":"half"}}],"usage":{"input_tokens":850,"output_tokens":145}}
{"text":"never asked for","usage":{"input_tokens":1,"output_tokens":1}}
`
	p, _ := runJob(t, scriptedJob(1000, "write"), script)
	last := final(t, p)
	rep := last.Job
	if last.State != sandboxwire.Failed || last.Reason != sandboxwire.ReasonTokenLimit || rep.Outcome != sandboxwire.JobFailed ||
		rep.Failure == nil || rep.Failure.Category != sandboxwire.FailureTokenLimit || rep.TokensUsed != 995 {
		t.Fatalf("final report %+v, job %+v failure %+v", last, rep, rep.Failure)
	}
	got := checkUploaded(t, p, rep)
	if len(rep.Outputs) != 1 || got["output/partial.md"] != "half" || rep.Log == nil || !strings.Contains(got[sandboxwire.JobLogPath], `"event":"job_failed"`) {
		t.Errorf("outputs %+v log %+v", rep.Outputs, rep.Log)
	}
	if strings.Contains(got[sandboxwire.JobLogPath], "never asked for") {
		t.Error("the call over the limit was made")
	}
}

// TestJobWithASmallTokenLimit: a token limit smaller than the profile's
// max tokens is a budget to spend, not a refusal: each call asks for what
// remains, and the job succeeds within it.
func TestJobWithASmallTokenLimit(t *testing.T) {
	script := `{"text":"writing","tool_calls":[{"name":"write","args":{"path":"output/report.md","content":"Otters hold hands."}}],"usage":{"input_tokens":900,"output_tokens":60}}
{"text":"Done: output/report.md.","usage":{"input_tokens":980,"output_tokens":20}}
`
	job := scriptedJob(2000, "write")
	job.Profile.MaxTokens = 1000
	p, _ := runJob(t, job, script)
	last := final(t, p)
	if rep := last.Job; rep.Outcome != sandboxwire.JobCompleted || rep.TokensUsed != 1960 || rep.Failure != nil {
		t.Fatalf("final report %+v, job %+v failure %+v", last, rep, rep.Failure)
	}
}

// TestJobFailsRateLimited: a job whose model provider keeps answering 429
// through the platform's model gateway (the SDK's retries spent) fails
// with rate_limit.
func TestJobFailsRateLimited(t *testing.T) {
	job := scriptedJob(100000, "write")
	job.Profile.Provider, job.Profile.Model = "anthropic", "claude-sonnet-4-5"
	p, _ := runJobOn(t, &jobPlatform{modelStatus: http.StatusTooManyRequests}, job, "")
	last := final(t, p)
	rep := last.Job
	if rep.Outcome != sandboxwire.JobFailed || rep.Failure == nil || rep.Failure.Category != sandboxwire.FailureRateLimit || p.modelCalls < 2 {
		t.Fatalf("final report %+v, job %+v failure %+v after %d model calls", last, rep, rep.Failure, p.modelCalls)
	}
}

// TestJobStopsAtItsTimeout: a job past its timeout is stopped (its command
// killed) and fails with timeout, its log kept.
func TestJobStopsAtItsTimeout(t *testing.T) {
	script := `{"text":"waiting","tool_calls":[{"name":"bash","args":{"command":"echo started > output/started.txt; sleep 60"}}]}
{"text":"never asked for"}
`
	job := scriptedJob(100000, "bash")
	job.TimeoutSeconds = 1
	p, _ := runJob(t, job, script)
	last := final(t, p)
	rep := last.Job
	if last.State != sandboxwire.Failed || last.Reason != sandboxwire.ReasonTimeout || rep.Failure == nil || rep.Failure.Category != sandboxwire.FailureTimeout {
		t.Fatalf("final report %+v, job %+v", last, rep)
	}
	got := checkUploaded(t, p, rep)
	if got["output/started.txt"] != "started\n" || !strings.Contains(got[sandboxwire.JobLogPath], `"event":"job_failed"`) {
		t.Errorf("uploaded %q", got)
	}
}

// TestJobCancelledWhileRunning: when the platform says stop (the job
// cancelled), the run stops at once, and the sandbox reports the job
// cancelled with what it produced.
func TestJobCancelledWhileRunning(t *testing.T) {
	script := `{"text":"working","tool_calls":[{"name":"bash","args":{"command":"echo begun > output/begun.txt; sleep 60"}}]}
{"text":"never asked for"}
`
	p, _ := runJobOn(t, &jobPlatform{cancelled: true, cancelAfter: "output/begun.txt"}, scriptedJob(100000, "bash"), script)
	last := final(t, p)
	rep := last.Job
	if last.State != sandboxwire.Ended || rep.Outcome != sandboxwire.JobCancelled || rep.Failure != nil {
		t.Fatalf("final report %+v, job %+v", last, rep)
	}
	got := checkUploaded(t, p, rep)
	if got["output/begun.txt"] != "begun\n" || !strings.Contains(got[sandboxwire.JobLogPath], `"event":"job_cancelled"`) {
		t.Errorf("uploaded %q", got)
	}
	// While it ran, its heartbeats said what it had made so far.
	if !slices.ContainsFunc(p.beats, func(b sandboxwire.HeartbeatReport) bool {
		return b.Usage != nil && b.Usage.Files == 1 && b.Usage.LogBytes > 0
	}) {
		t.Errorf("no heartbeat reported the output file and the log: %+v", p.beats)
	}
}

// TestJobThatKeepsEscapingFails: each escape is refused to the model and
// logged; past MaxViolations the job fails with policy_violation.
func TestJobThatKeepsEscapingFails(t *testing.T) {
	var b strings.Builder
	for range 4 {
		b.WriteString(`{"text":"trying","tool_calls":[{"name":"read","args":{"path":"/etc/passwd"}}]}` + "\n")
	}
	b.WriteString(`{"text":"never asked for"}` + "\n")
	p, _ := runJob(t, scriptedJob(100000, "read"), b.String())
	last := final(t, p)
	rep := last.Job
	if last.State != sandboxwire.Failed || rep.Failure == nil || rep.Failure.Category != sandboxwire.FailurePolicyViolation {
		t.Fatalf("final report %+v, job %+v", last, rep)
	}
	got := checkUploaded(t, p, rep)
	if n := strings.Count(got[sandboxwire.JobLogPath], `"event":"policy_violation"`); n != 4 || strings.Contains(got[sandboxwire.JobLogPath], "root:") {
		t.Errorf("%d violations logged, want 4, and nothing read:\n%s", n, got[sandboxwire.JobLogPath])
	}
}

// TestJobRunsTheProfilesAgentfile: a profile whose skills name one of its
// Agentfiles runs that workflow, its inputs taken from inputData, its
// tools the profile's, the guardrails first in every system prompt.
func TestJobRunsTheProfilesAgentfile(t *testing.T) {
	script := `{"text":"writing","tool_calls":[{"name":"write","args":{"path":"output/summary.md","content":"Otters, briefly."}}]}
{"text":"Summary written to output/summary.md."}
`
	job := scriptedJob(100000, "write", "summarise")
	job.Profile.Agentfiles = map[string]string{"summarise": "NAME summarise\nINPUT topic\nGOAL summary \"Summarise $topic into output/summary.md.\"\nRUN main USING summary\n"}
	p, _ := runJob(t, job, script)
	last := final(t, p)
	rep := last.Job
	if last.State != sandboxwire.Ended || rep.Outcome != sandboxwire.JobCompleted {
		t.Fatalf("final report %+v, job %+v %+v", last, rep, rep.Failure)
	}
	got := checkUploaded(t, p, rep)
	log := got[sandboxwire.JobLogPath]
	if got["output/summary.md"] != "Otters, briefly." || !strings.Contains(log, `"event":"goal_complete"`) || !strings.Contains(log, "Summary written") {
		t.Errorf("uploaded %q", got)
	}

	// An Agentfile that reads prompt files cannot run: the job fails at start.
	job.Profile.Agentfiles["summarise"] = "NAME summarise\nGOAL summary FROM prompt.md\nRUN main USING summary\n"
	p, _ = runJobOn(t, &jobPlatform{startFails: true}, job, script)
	if last := final(t, p); last.State != sandboxwire.Failed || last.Job.Failure == nil || !strings.Contains(last.Job.Failure.Message, "FROM") {
		t.Errorf("an Agentfile with FROM: %+v %+v", last, last.Job.Failure)
	}
}

// TestJobSandboxIsNeverReused: a job directory already there (another run
// of the job) is refused: the job fails at start, as a crash, touching
// nothing there.
func TestJobSandboxIsNeverReused(t *testing.T) {
	p, dir := runJobOn(t, &jobPlatform{startFails: true, reused: true}, scriptedJob(1000, "write"), `{"text":"never"}`)
	last := final(t, p)
	if len(p.reports) != 1 || last.State != sandboxwire.Failed || last.Job.Failure == nil || last.Job.Failure.Category != sandboxwire.FailureCrash ||
		!strings.Contains(last.Job.Failure.Message, "never reused") {
		t.Errorf("reports %+v, failure %+v", p.reports, last.Job.Failure)
	}
	if _, err := os.Stat(filepath.Join(dir, "input")); err == nil {
		t.Error("an input/ was written into the reused directory")
	}
}
