package systemtest_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring/jobservice"
	"github.com/remote-agents/remote-agents/shared/wiring/jobworker"
)

// orchestrator is the dev orchestrator calling the /internal/ routes.
type orchestrator struct {
	s     *stack
	creds aws.Credentials
	// at, if set, is the signing time.
	at time.Time
	// service is the service requests are signed for; "" execute-api (API
	// Gateway's), lambda for a function URL's stream.
	service                    string
	identity, context, command string
}

func newOrchestrator(s *stack) *orchestrator {
	return &orchestrator{s: s, creds: aws.Credentials{AccessKeyID: devserver.DefaultOrchestratorKeyID, SecretAccessKey: devserver.DefaultOrchestratorSecret},
		identity: uuid.NewString(), context: uuid.NewString(), command: uuid.NewString()}
}

// headers are the mandatory headers of a call for plan step step.
func (o *orchestrator) headers(step string) map[string]string {
	return map[string]string{"x-identity-id": o.identity, "x-context-id": o.context, "x-command-id": o.command, "x-plan-step-id": step}
}

// do sends a request signed with o's credentials (unsigned if sign is
// false); sent, if not nil, replaces the body after signing.
func (o *orchestrator) do(method, path string, body any, hdrs map[string]string, sign bool, sent []byte) reply {
	t := o.s.t
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, o.s.srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdrs {
		req.Header.Set(k, v)
	}
	if sign {
		at := o.at
		if at.IsZero() {
			at = time.Now()
		}
		sum := sha256.Sum256(raw)
		if err := v4.NewSigner().SignHTTP(t.Context(), o.creds, req, hex.EncodeToString(sum[:]), cmp.Or(o.service, "execute-api"), o.s.srv.Env.AWS.Region, at); err != nil {
			t.Fatal(err)
		}
	}
	if sent != nil {
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(sent)), int64(len(sent))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := reply{status: res.StatusCode, raw: string(b), headers: res.Header}
	_ = json.Unmarshal(b, &r.body)
	return r
}

// followLog opens job id's log stream with the request signed for service
// (as on AWS: lambda, its function URL's), resuming after lastID if > 0.
func (o *orchestrator) followLog(t testing.TB, id, step, service string, lastID int64) *sse {
	t.Helper()
	path := "/internal/jobs/" + id + "/logs/stream"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, o.s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range o.headers(step) {
		req.Header.Set(k, v)
	}
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	empty := sha256.Sum256(nil)
	if err := v4.NewSigner().SignHTTP(t.Context(), o.creds, req, hex.EncodeToString(empty[:]), service, o.s.srv.Env.AWS.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	return o.s.openStream(t, path, req.Header, lastID)
}

func (o *orchestrator) call(method, path string, body any, step string) reply {
	o.s.t.Helper()
	return o.do(method, path, body, o.headers(step), true, nil)
}

// putProfile creates an agent profile and returns its id.
func (o *orchestrator) putProfile(t testing.TB, step string) string {
	t.Helper()
	id := uuid.NewString()
	r := o.call(http.MethodPut, "/internal/agents/"+id, map[string]any{"name": "Writer", "agent_level": "L1", "llm_provider": "scripted",
		"llm_model": "scripted", "max_tokens": 4096, "allowed_skills": []string{"read", "write"}}, step)
	if r.status != http.StatusOK || r.body["temperature"] != 0.2 || r.str("id") != id {
		t.Fatalf("put profile: %d %s", r.status, r.raw)
	}
	return id
}

func (o *orchestrator) jobBody(agent, step string, tokens int) map[string]any {
	return map[string]any{"commandId": o.command, "planStepId": step, "agentId": agent, "identityId": o.identity, "contextId": o.context,
		"tokenLimit": tokens, "inputData": map[string]any{"task": "write two files", "files": map[string]string{"brief.md": "# Brief"}},
		"constraints": map[string]any{"timeout": 600, "network": false}}
}

// jobSession waits for job id's sandbox session.
func (s *stack) jobSession(t *testing.T, id string) string {
	t.Helper()
	svc, err := jobservice.Service(t.Context(), s.srv.Env)
	if err != nil {
		t.Fatal(err)
	}
	var sid string
	eventually(t, 20*time.Second, "job's sandbox session", func() bool {
		sid, err = svc.SessionOf(t.Context(), id)
		return err == nil && sid != ""
	})
	return sid
}

// jobEvents reads the orchestrator queue until n events of job id came,
// then checks that no more come.
func (s *stack) jobEvents(t *testing.T, id string, n int) []jobevents.Envelope {
	t.Helper()
	q, err := s.srv.Env.OrchestratorQueue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []jobevents.Envelope
	// Delivery is at least once (SQS redelivers a message whose delete came
	// late; the publisher sends again an entry it was not told was taken):
	// as the orchestrator does, an event is taken once by its stable id.
	seen := map[string]bool{}
	read := func() {
		msgs, err := q.Receive(t.Context(), 10, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			var env jobevents.Envelope
			if err := json.Unmarshal([]byte(m.Body), &env); err != nil {
				t.Fatalf("not an envelope: %s", m.Body)
			}
			var d jobevents.Detail
			if err := json.Unmarshal(env.Detail, &d); err != nil || d.JobID != id {
				t.Fatalf("event of another job, or no detail: %s", m.Body)
			}
			_ = q.Delete(t.Context(), m.ReceiptHandle)
			if key := strings.Join(env.Resources, " "); seen[key] {
				continue
			} else {
				seen[key] = true
			}
			got = append(got, env)
		}
	}
	eventually(t, 20*time.Second, "job events on the orchestrator queue", func() bool {
		read()
		return len(got) >= n
	})
	read() // nothing more may come
	if len(got) != n {
		t.Errorf("%d events, want %d", len(got), n)
	}
	return got
}

func wantTypes(t *testing.T, got []jobevents.Envelope, want ...jobevents.DetailType) {
	t.Helper()
	var types []jobevents.DetailType
	ids := map[string]bool{}
	for _, e := range got {
		types = append(types, e.DetailType)
		if ids[e.ID] || e.Source != jobevents.Source || e.Version != "0" {
			t.Errorf("envelope %+v: duplicate id or wrong source", e)
		}
		ids[e.ID] = true
	}
	if !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
}

func TestInternalRoutesRefuseUnsignedAndIncompleteCalls(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	o := newOrchestrator(s)
	step := uuid.NewString()
	agent := o.putProfile(t, step)
	body := o.jobBody(agent, step, 1000)

	// Each mandatory header missing in turn, then all: named, before the body.
	for _, h := range []string{"x-identity-id", "x-context-id", "x-command-id", "x-plan-step-id"} {
		hd := o.headers(step)
		delete(hd, h)
		r := o.do(http.MethodPost, "/internal/jobs", body, hd, true, nil)
		wantError(t, r, 400, "missing_headers")
		d, _ := r.body["details"].(map[string]any)
		if !strings.Contains(r.str("message"), h) || len(d["missing"].([]any)) != 1 || d["missing"].([]any)[0] != h {
			t.Errorf("missing %s: %s", h, r.raw)
		}
	}
	r := o.do(http.MethodGet, "/internal/jobs/"+uuid.NewString(), nil, map[string]string{}, true, nil)
	wantError(t, r, 400, "missing_headers")
	if d, _ := r.body["details"].(map[string]any); len(d["missing"].([]any)) != 4 {
		t.Errorf("all missing: %s", r.raw)
	}
	// Each header must be its body field.
	for _, f := range []string{"identityId", "contextId", "commandId", "planStepId"} {
		b := o.jobBody(agent, step, 1000)
		b[f] = uuid.NewString()
		wantError(t, o.call(http.MethodPost, "/internal/jobs", b, step), 400, "invalid_request")
	}
	// Unsigned, wrongly signed, expired, tampered: refused.
	wantError(t, o.do(http.MethodPost, "/internal/jobs", body, o.headers(step), false, nil), 403, "forbidden")
	wrong := *o
	wrong.creds.SecretAccessKey = "not-the-secret"
	wantError(t, wrong.call(http.MethodPost, "/internal/jobs", body, step), 403, "forbidden")
	stale := *o
	stale.at = time.Now().Add(-6 * time.Minute)
	wantError(t, stale.call(http.MethodPost, "/internal/jobs", body, step), 403, "forbidden")
	tampered, _ := json.Marshal(o.jobBody(agent, step, 999999))
	wantError(t, o.do(http.MethodPost, "/internal/jobs", body, o.headers(step), true, tampered), 403, "forbidden")
	// The DTO exactly: unknown fields, bad ids, a zero token limit, a non-object input.
	for name, mutate := range map[string]func(map[string]any){
		"unknown field":  func(b map[string]any) { b["priority"] = 1 },
		"agent not uuid": func(b map[string]any) { b["agentId"] = "writer" },
		"token limit 0":  func(b map[string]any) { b["tokenLimit"] = 0 },
		"input array":    func(b map[string]any) { b["inputData"] = []int{1} },
		"bad constraint": func(b map[string]any) { b["constraints"] = map[string]any{"timeout": -1} },
	} {
		b := o.jobBody(agent, step, 1000)
		mutate(b)
		if r := o.call(http.MethodPost, "/internal/jobs", b, step); r.status != 400 {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	b := o.jobBody(uuid.NewString(), step, 1000)
	wantError(t, o.call(http.MethodPost, "/internal/jobs", b, step), 404, "agent_profile_not_found")
	// Profiles are validated.
	wantError(t, o.call(http.MethodPut, "/internal/agents/"+uuid.NewString(), map[string]any{"name": "x", "agent_level": "L9", "llm_provider": "openai",
		"llm_model": "gpt-4o", "max_tokens": 10, "allowed_skills": []string{}}, step), 400, "invalid_request")
	wantError(t, o.call(http.MethodPut, "/internal/agents/"+uuid.NewString(), map[string]any{"name": "x", "agent_level": "L0", "llm_provider": "openai",
		"llm_model": "gpt-4o", "max_tokens": 10, "allowed_skills": []string{"rm_rf"}}, step), 400, "invalid_request")
	if r := o.call(http.MethodGet, "/internal/agents", nil, step); r.status != 200 || len(r.body["agents"].([]any)) != 1 {
		t.Errorf("list profiles: %d %s", r.status, r.raw)
	}
	if r := o.call(http.MethodGet, "/internal/agents/"+agent, nil, step); r.status != 200 || r.str("llm_provider") != "scripted" {
		t.Errorf("get profile: %d %s", r.status, r.raw)
	}
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	o := newOrchestrator(s)
	step := uuid.NewString()
	agent := o.putProfile(t, step)
	body := o.jobBody(agent, step, 1000)

	created := o.call(http.MethodPost, "/internal/jobs", body, step)
	id := created.str("id")
	if created.status != http.StatusCreated || created.str("status") != "created" || id == "" {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	// The same plan step: the same body replays, another is a conflict.
	again := o.call(http.MethodPost, "/internal/jobs", body, step)
	if again.status != 200 || again.str("id") != id || again.headers.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %d %s %v", again.status, again.raw, again.headers)
	}
	wantError(t, o.call(http.MethodPost, "/internal/jobs", o.jobBody(agent, step, 2000), step), 409, "plan_step_conflict")
	// Another identity sees nothing.
	other := *o
	other.identity = uuid.NewString()
	wantError(t, other.call(http.MethodGet, "/internal/jobs/"+id, nil, step), 404, "job_not_found")

	// job.run launched the job's sandbox; a redelivered job.run launches no other.
	sid := s.jobSession(t, id)
	worker, err := jobworker.Build(t.Context(), s.srv.Env)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(jobqueue.Message{Type: jobqueue.JobRun, JobID: id})
	for i := range 2 {
		res, err := worker.Worker(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: string(rune('a' + i)), Body: string(msg)}}})
		if err != nil || len(res.BatchItemFailures) != 0 {
			t.Fatalf("redelivered job.run: %v %+v", err, res)
		}
	}
	sb := s.sandboxToken(t, sid)
	if _, err := os.Stat(filepath.Join(s.work, "sandboxes", sid+"-2")); !os.IsNotExist(err) {
		t.Errorf("a second sandbox was launched: %v", err)
	}
	if n := len(s.srv.Launcher.Running()); n != 1 {
		t.Errorf("%d sandboxes running, want 1", n)
	}

	// The sandbox reads its job, reports ready: the job runs.
	spec := s.call(http.MethodGet, "/sandbox/"+sid+"/spec", sb, nil)
	js, _ := spec.body["job"].(map[string]any)
	if spec.status != 200 || js["job_id"] != id || js["token_limit"] != float64(1000) || js["network"] != false {
		t.Fatalf("spec: %d %s", spec.status, spec.raw)
	}
	if tools, _ := spec.body["tools"].([]any); len(tools) != 2 {
		t.Errorf("tools %v, want the profile's read and write", spec.body["tools"])
	}
	hash := spec.body["guardrails"].(map[string]any)["hash"].(string)
	if r := s.call(http.MethodPost, "/sandbox/"+sid+"/status", sb, map[string]any{"state": "ready", "guardrails_hash": hash}); r.status != 200 {
		t.Fatalf("ready: %d %s", r.status, r.raw)
	}
	running := o.call(http.MethodGet, "/internal/jobs/"+id, nil, step)
	if running.str("status") != "running" || running.body["started_at"] == nil {
		t.Errorf("job after ready: %s", running.raw)
	}
	// tokens_used is live: what the model gateway metered on its sandbox's session.
	if err := s.srv.Env.SessionStore().AddUsage(t.Context(), sid, session.Usage{InputTokens: 100, OutputTokens: 20, Calls: 1}); err != nil {
		t.Fatal(err)
	}
	if r := o.call(http.MethodGet, "/internal/jobs/"+id, nil, step); r.body["tokens_used"] != float64(120) {
		t.Errorf("live tokens: %s", r.raw)
	}
	// While it runs the log is the sandbox's trace, after a cursor.
	if r := s.call(http.MethodPost, "/sandbox/"+sid+"/events", sb, map[string]any{"events": []map[string]any{{"type": "agent.message", "data": map[string]any{"text": "writing"}}}}); r.status != 200 {
		t.Fatalf("events: %d %s", r.status, r.raw)
	}
	live := o.call(http.MethodGet, "/internal/jobs/"+id+"/logs", nil, step)
	if live.status != 200 || !strings.Contains(live.raw, `"writing"`) || live.headers.Get("X-Log-Cursor") != "1" || live.headers.Get("Content-Type") != "application/x-ndjson" {
		t.Errorf("live log: %d %q %v", live.status, live.raw, live.headers)
	}
	if r := o.call(http.MethodGet, "/internal/jobs/"+id+"/logs?after=1", nil, step); r.status != 200 || r.raw != "" {
		t.Errorf("log after the cursor: %d %q", r.status, r.raw)
	}
	// A read that waits gets the next line as it is written.
	followed := make(chan reply, 1)
	go func() { followed <- o.call(http.MethodGet, "/internal/jobs/"+id+"/logs?after=1&wait=20", nil, step) }()
	if r := s.call(http.MethodPost, "/sandbox/"+sid+"/events", sb, map[string]any{"events": []map[string]any{{"type": "agent.message", "data": map[string]any{"text": "still writing"}}}}); r.status != 200 {
		t.Fatalf("events: %d %s", r.status, r.raw)
	}
	if r := <-followed; r.status != 200 || !strings.Contains(r.raw, `"still writing"`) || r.headers.Get("X-Log-Cursor") != "2" {
		t.Errorf("a waiting read: %d %q %v", r.status, r.raw, r.headers)
	}
	if r := o.call(http.MethodGet, "/internal/jobs/"+id+"/logs?wait=21", nil, step); r.status != 400 {
		t.Errorf("wait past the bound: %d %s", r.status, r.raw)
	}

	// Two files and the log uploaded; the sandbox reports the job completed.
	upload := func(path, content string) map[string]any {
		key := "jobs/" + id + "/" + path
		if err := s.srv.Env.Bucket().Put(t.Context(), key, strings.NewReader(content), int64(len(content)), "text/plain"); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(content))
		return map[string]any{"path": path, "key": key, "size_bytes": len(content), "sha256": hex.EncodeToString(sum[:])}
	}
	a, b := upload("output/a.md", "# A"), upload("output/b.csv", "x,y\n1,2\n")
	logRef := upload("logs/agent.log", "step 1\nstep 2\n")
	end := s.call(http.MethodPost, "/sandbox/"+sid+"/status", sb, map[string]any{"state": "ended", "reason": "idle",
		"job": map[string]any{"outcome": "completed", "tokens_used": 950, "outputs": []any{a, b}, "log": logRef}})
	if end.status != 200 {
		t.Fatalf("ended: %d %s", end.status, end.raw)
	}
	done := o.call(http.MethodGet, "/internal/jobs/"+id, nil, step)
	res, _ := done.body["resources"].(map[string]any)
	if done.str("status") != "completed" || done.body["tokens_used"] != float64(950) || done.body["finished_at"] == nil || res["filesCreated"] != float64(2) {
		t.Errorf("completed job: %s", done.raw)
	}
	if alerts, _ := done.body["alerts"].([]any); len(alerts) != 1 {
		t.Errorf("950 of 1000 tokens: want the token alert, got %v", done.body["alerts"])
	}
	outs := o.call(http.MethodGet, "/internal/jobs/"+id+"/outputs", nil, step)
	list, _ := outs.body["outputs"].([]any)
	var types []string
	for _, it := range list {
		m := it.(map[string]any)
		types = append(types, m["output_type"].(string))
		ref := m["reference"].(map[string]any)
		rc, _, err := s.srv.Env.Bucket().Get(t.Context(), ref["key"].(string))
		if err != nil || ref["bucket"] != s.srv.Env.Resources.Bucket.Name {
			t.Errorf("reference %v: %v", ref, err)
			continue
		}
		got, _ := io.ReadAll(rc)
		_ = rc.Close()
		sum := sha256.Sum256(got)
		if hex.EncodeToString(sum[:]) != ref["sha256"] || float64(len(got)) != ref["size"] {
			t.Errorf("reference %v does not match its object", ref)
		}
	}
	if !slices.Equal(types, []string{"file", "file", "log"}) {
		t.Errorf("outputs %s", outs.raw)
	}
	if r := o.call(http.MethodGet, "/internal/jobs/"+id+"/logs", nil, step); r.status != 200 || r.raw != "step 1\nstep 2\n" {
		t.Errorf("whole log: %d %q", r.status, r.raw)
	}
	wantError(t, o.call(http.MethodPost, "/internal/jobs/"+id+"/cancel", nil, step), 409, "job_not_running")

	evs := s.jobEvents(t, id, 4)
	wantTypes(t, evs, jobevents.Created, jobevents.Started, jobevents.OutputGenerated, jobevents.Completed)
	var last jobevents.Detail
	_ = json.Unmarshal(evs[3].Detail, &last)
	if last.Status != "completed" || last.Metadata == nil || *last.Metadata.TokensUsed != 950 || *last.Metadata.Outputs != 3 || last.CommandID != o.command {
		t.Errorf("completed detail %s", evs[3].Detail)
	}
}

func TestJobCancelWhileRunning(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	o := newOrchestrator(s)
	step := uuid.NewString()
	agent := o.putProfile(t, step)
	created := o.call(http.MethodPost, "/internal/jobs", o.jobBody(agent, step, 1000), step)
	id := created.str("id")
	sid := s.jobSession(t, id)
	sb := s.sandboxToken(t, sid)
	spec := s.call(http.MethodGet, "/sandbox/"+sid+"/spec", sb, nil)
	hash := spec.body["guardrails"].(map[string]any)["hash"].(string)
	if r := s.call(http.MethodPost, "/sandbox/"+sid+"/status", sb, map[string]any{"state": "ready", "guardrails_hash": hash}); r.status != 200 {
		t.Fatalf("ready: %d %s", r.status, r.raw)
	}
	c := o.call(http.MethodPost, "/internal/jobs/"+id+"/cancel", nil, step)
	if c.status != 200 || c.str("status") != "cancelled" || c.body["finished_at"] == nil {
		t.Fatalf("cancel: %d %s", c.status, c.raw)
	}
	// job.cancel stops the sandbox.
	eventually(t, 20*time.Second, "the cancelled job's sandbox stopped", func() bool { return len(s.srv.Launcher.Running()) == 0 })
	wantError(t, o.call(http.MethodPost, "/internal/jobs/"+id+"/cancel", nil, step), 409, "job_not_running")
	wantTypes(t, s.jobEvents(t, id, 3), jobevents.Created, jobevents.Started, jobevents.Cancelled)
}

func TestJobCrashFailsTheJob(t *testing.T) {
	t.Parallel()
	// A sandbox that dies at once, without reporting.
	s := start(t, withSandbox("/bin/sh", "-c", "exit 3"))
	o := newOrchestrator(s)
	step := uuid.NewString()
	agent := o.putProfile(t, step)
	id := o.call(http.MethodPost, "/internal/jobs", o.jobBody(agent, step, 1000), step).str("id")
	var j reply
	eventually(t, 30*time.Second, "the job failed", func() bool {
		j = o.call(http.MethodGet, "/internal/jobs/"+id, nil, step)
		return j.str("status") == "failed"
	})
	if f, _ := j.body["failure"].(map[string]any); f["category"] != "crash" {
		t.Errorf("failed job: %s", j.raw)
	}
	wantTypes(t, s.jobEvents(t, id, 2), jobevents.Created, jobevents.Failed)
}

var _ = context.Background
