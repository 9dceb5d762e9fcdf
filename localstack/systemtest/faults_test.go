package systemtest_test

// The fault suite (issue 19), end to end: each TestFault… test breaks one
// thing the platform must survive, on the dev server with its real pollers,
// emulators and sandbox processes, and checks that nothing was lost. Its
// first lines say what "nothing lost" means for it. `go test -run
// '^TestFault' ./...` runs the whole suite, these and the shared packages'.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/queueworker"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
	"github.com/remote-agents/remote-agents/shared/token"
	jobworkerfunc "github.com/remote-agents/remote-agents/shared/wiring/jobworker"
)

// faultLongSandbox is a fake sandbox (see fakeSandbox) that outlives the
// slowest test: it only writes its bootstrap code, and the test acts as it.
func faultLongSandbox() option {
	return withSandbox("/bin/sh", "-c", `echo "$RA_BOOTSTRAP_CODE" > code; exec sleep 900`)
}

// faultEnv runs the dev server on environment env, bootstrapped beforehand.
func faultEnv(env string) option {
	return func(o *devserver.Options) { o.Env = env }
}

// faultStartMessage is the body of session id's session.start of generation 1.
func faultStartMessage(id string) string {
	return `{"type":"session.start","session_id":"` + id + `","generation":1}`
}

// faultProvisioning writes a session as create writes it, in provisioning,
// without queueing its start (the test delivers it), and returns its id and
// session token.
func faultProvisioning(t *testing.T, s *stack) (string, string) {
	t.Helper()
	id := uuid.NewString()
	tok, hash := token.New(token.Session)
	now := time.Now().UTC()
	if err := s.srv.Env.SessionStore().Create(t.Context(), session.Session{
		ID: id, Blueprint: session.Blueprint{
			ProjectName:     "demo",
			PersonaSlug:     "assistant",
			InitialPrompt:   "Hello",
			TmuxSessionName: "ra-" + id[:8],
		},
		State:      session.Provisioning,
		Generation: 1, TokenHashes: []string{hash}, CreatedAt: now, UpdatedAt: now,
	}, nil); err != nil {
		t.Fatal(err)
	}
	return id, tok
}

// faultWorker is another instance of the jobworker function (another Lambda
// instance), over the dev server's stores and launcher: a delivery handed to
// it is handled when it returns.
func faultWorker(t *testing.T, s *stack) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	t.Helper()
	w, err := jobworkerfunc.Build(t.Context(), s.srv.Env)
	if err != nil {
		t.Fatal(err)
	}
	return w.Worker
}

// faultDeliver hands each body to handle as its own delivery of the message
// with id messageID, all at once, as SQS redelivers a message to concurrent
// pollers; none may be reported failed.
func faultDeliver(t *testing.T, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), messageID string, bodies ...string) {
	t.Helper()
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			rec := events.SQSMessage{MessageId: messageID, ReceiptHandle: fmt.Sprintf("%s-%d", messageID, i), Body: body, EventSource: "aws:sqs"}
			res, err := handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{rec}})
			if err != nil || len(res.BatchItemFailures) != 0 {
				t.Errorf("delivery %d of %s: %+v %v", i, messageID, res, err)
			}
		})
	}
	wg.Wait()
}

// faultLaunches lists the launches of session id: its sandboxes' folders,
// one per generation launched ("<id>-<generation>").
func faultLaunches(s *stack, id string) []string {
	entries, _ := os.ReadDir(filepath.Join(s.work, "sandboxes"))
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), id+"-") && !strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// faultLogLines counts the server's log lines holding every one of parts.
func faultLogLines(s *stack, parts ...string) int {
	n := 0
	for line := range strings.Lines(s.logs.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// faultCall is stack.call for any goroutine: it returns transport errors
// instead of failing the test.
func faultCall(ctx context.Context, s *stack, method, path, bearer string, body any, headers ...string) (reply, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.srv.URL+path, rd)
	if err != nil {
		return reply{}, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: res.StatusCode, raw: string(raw), headers: res.Header}
	_ = json.Unmarshal(raw, &r.body)
	return r, nil
}

// faultBecomeReady acts as the fake sandbox of session id's first launch: it
// waits for the code the sandbox wrote, spends it, reads the spec and reports
// ready. It returns the sandbox token.
func faultBecomeReady(ctx context.Context, s *stack, id string) (string, error) {
	codeFile := filepath.Join(s.work, "sandboxes", id+"-1", "code")
	var code string
	for code == "" {
		b, err := os.ReadFile(codeFile)
		if code = strings.TrimSpace(string(b)); err == nil && code != "" {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no bootstrap code from the sandbox of %s: %w", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	// A 503 is retried, as a sandbox's gateway client retries it (a loaded
	// machine's DynamoDB answers some).
	call := func(what, method, path, bearer string, body any) (reply, error) {
		for tries := 1; ; tries++ {
			r, err := faultCall(ctx, s, method, path, bearer, body)
			if err != nil {
				return r, fmt.Errorf("%s %s: %w", what, id, err)
			}
			if r.status == http.StatusServiceUnavailable && tries < 10 {
				select {
				case <-ctx.Done():
					return r, ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			if r.status != http.StatusOK {
				return r, fmt.Errorf("%s %s: %d %s", what, id, r.status, r.raw)
			}
			return r, nil
		}
	}
	r, err := call("bootstrap", http.MethodPost, "/sandbox/"+id+"/bootstrap", code, nil)
	if err != nil {
		return "", err
	}
	sb := r.str("sandbox_token")
	spec, err := call("spec", http.MethodGet, "/sandbox/"+id+"/spec", sb, nil)
	if err != nil {
		return "", err
	}
	g, _ := spec.body["guardrails"].(map[string]any)
	hash, _ := g["hash"].(string)
	if _, err := call("ready", http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "ready", "guardrails_hash": hash}); err != nil {
		return "", err
	}
	return sb, nil
}

// faultHeartbeats heart-beats as session id's ready sandbox does, until ctx
// ends or the platform refuses one (4xx: its session is over): a test that outlasts
// session.HeartbeatTimeout on a loaded machine must not see its agents swept
// as lost.
func faultHeartbeats(ctx context.Context, s *stack, id, sb string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(session.HeartbeatTimeout / 6):
		}
		// A refusal ends it (its session is over); a failure of a loaded
		// machine (503, a timeout) is retried at the next beat, as a real
		// sandbox's.
		if r, err := faultCall(ctx, s, http.MethodPost, "/sandbox/"+id+"/heartbeat", sb, nil); err == nil && r.status >= 400 && r.status < 500 {
			return
		}
	}
}

// faultSandboxes acts as every fake sandbox that starts but those of the
// sessions skip, reporting ready and then heart-beating, until stop is
// called, which returns what went wrong for each session it acted for.
func faultSandboxes(t *testing.T, s *stack, skip ...string) (stop func() map[string]error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var (
		mu     sync.Mutex
		failed = map[string]error{}
		wg     sync.WaitGroup
	)
	seen := map[string]bool{}
	for _, id := range skip {
		seen[id] = true
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			entries, _ := os.ReadDir(filepath.Join(s.work, "sandboxes"))
			for _, e := range entries {
				id, ok := strings.CutSuffix(e.Name(), "-1")
				if !ok || !e.IsDir() || seen[id] {
					continue
				}
				seen[id] = true
				wg.Go(func() {
					sb, err := faultBecomeReady(ctx, s, id)
					if err != nil {
						if ctx.Err() == nil {
							mu.Lock()
							failed[id] = err
							mu.Unlock()
						}
						return
					}
					faultHeartbeats(ctx, s, id, sb)
				})
			}
			select {
			case <-ctx.Done():
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	return func() map[string]error {
		cancel()
		<-done
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return failed
	}
}

// faultSessions reads every session of the stack's environment (a table
// of its own): the whole table, not an index that may lag.
func faultSessions(t *testing.T, s *stack) []session.Session {
	t.Helper()
	ddb := awsconfig.NewDynamoDB(s.srv.Env.AWS)
	var ids []string
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := ddb.Scan(t.Context(), &dynamodb.ScanInput{
			TableName: aws.String(s.srv.Env.Resources.Sessions.Name), ConsistentRead: aws.Bool(true),
			ProjectionExpression: aws.String("session_id"), ExclusiveStartKey: start,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			if v, ok := it["session_id"].(*ddbtypes.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	out := make([]session.Session, 0, len(ids))
	for _, id := range ids {
		sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
		if err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
		out = append(out, sess)
	}
	return out
}

// faultNoOrphans checks that the running sandboxes are exactly those of the
// live sessions, one each, and returns the live sessions.
func faultNoOrphans(t *testing.T, s *stack) []session.Session {
	t.Helper()
	running := s.srv.Launcher.Running()
	var live []session.Session
	held := map[string]string{}
	for _, sess := range faultSessions(t, s) {
		if sess.State.Terminal() {
			if slices.Contains(running, sess.SandboxRef) && sess.SandboxRef != "" {
				t.Errorf("session %s is %s but its sandbox %s runs", sess.ID, sess.State, sess.SandboxRef)
			}
			continue
		}
		live = append(live, sess)
		switch {
		case sess.SandboxRef == "":
			t.Errorf("live session %s (%s) has no sandbox", sess.ID, sess.State)
		case !slices.Contains(running, sess.SandboxRef):
			t.Errorf("live session %s (%s) holds sandbox %s, which does not run", sess.ID, sess.State, sess.SandboxRef)
		case held[sess.SandboxRef] != "":
			t.Errorf("sessions %s and %s hold the same sandbox %s", held[sess.SandboxRef], sess.ID, sess.SandboxRef)
		}
		held[sess.SandboxRef] = sess.ID
	}
	for _, ref := range running {
		if held[ref] == "" {
			t.Errorf("sandbox %s runs for no live session", ref)
		}
	}
	return live
}

// faultDiesAtRecord is the session store of a worker that is killed (its
// context ends, as a Lambda's at its timeout) just as it would record the
// sandbox it launched: the launch happened, its record never comes.
type faultDiesAtRecord struct {
	session.Store
	die context.CancelFunc
}

func (d faultDiesAtRecord) Touch(ctx context.Context, id string, gen int, set session.Fields) (session.Session, error) {
	if set.SandboxRef != "" {
		d.die()
		return session.Session{}, fmt.Errorf("killed before recording sandbox %s of %s: %w", set.SandboxRef, id, context.Canceled)
	}
	return d.Store.Touch(ctx, id, gen, set)
}

// faultKilledLaunch runs the first delivery of session id's start on a
// worker killed between the launch and its record, whose claim's lease ran
// out long ago by its clock (SQS redelivers after its visibility timeout,
// longer than the lease), its sandbox reaching the platform at gateway. It
// returns that sandbox's reference.
func faultKilledLaunch(t *testing.T, s *stack, id, gateway string) string {
	t.Helper()
	before := s.srv.Launcher.Running()
	dying, die := context.WithCancel(t.Context())
	defer die()
	killed := queueworker.Worker{
		Store: faultDiesAtRecord{Store: s.srv.Env.SessionStore(), die: die}, Launcher: s.srv.Launcher, GatewayURL: gateway,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return time.Now().Add(-queueworker.LaunchLease - time.Minute) },
	}
	if err := killed.Do(dying, jobqueue.Message{Type: jobqueue.SessionStart, SessionID: id, Generation: 1}); err == nil {
		t.Fatal("the killed worker reported its launch done")
	}
	started := slices.DeleteFunc(s.srv.Launcher.Running(), func(ref string) bool { return slices.Contains(before, ref) })
	got, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || len(started) != 1 || got.SandboxRef != "" || got.LaunchLease.IsZero() {
		t.Fatalf("after the killed launch: started %v, session %+v %v; want one sandbox, claimed and unrecorded", started, got, err)
	}
	return started[0]
}

// TestFaultWorkerKilledBetweenLaunchAndRecord: jobworker is killed after the
// launcher started the sandbox and before it recorded it on the session;
// SQS delivers the message again after its visibility timeout, before or
// after the sandbox came up.
func TestFaultWorkerKilledBetweenLaunchAndRecord(t *testing.T) {
	t.Log(`nothing lost: each session ends up running on exactly one sandbox, never none, never two: when the message SQS delivers ` +
		`again finds the lost sandbox not come up, its claim has run out and one replacement (generation 2) is launched, and the lost ` +
		`sandbox stops by itself; when the lost sandbox came up first, the delivery records it on the session (so that a kill or the ` +
		`sweep can stop it) and launches nothing; further deliveries launch nothing (launches counted by their folders)`)
	t.Parallel()
	// Two generations of one session on one machine would share its tmux
	// socket; each Fargate task has its own.
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	store := s.srv.Env.SessionStore()
	live := func(id, tok string) func() bool {
		return func() bool {
			r := s.alive(id, tok)
			return r.status == http.StatusOK && r.str("state") != "provisioning"
		}
	}

	// Early: the lost sandbox reaches the platform only once the message came back.
	early, earlyTok := faultProvisioning(t, s)
	gateway, release := heldGateway(t, s.srv.URL)
	lostEarly := faultKilledLaunch(t, s, early, gateway)
	// Late: the lost sandbox holds the claim's code: it bootstraps and gets
	// ready minutes before SQS would deliver the message again.
	late, lateTok := faultProvisioning(t, s)
	lostLate := faultKilledLaunch(t, s, late, s.srv.URL)
	eventually(t, 30*time.Second, "the late session ready on its unrecorded sandbox", live(late, lateTok))

	// SQS delivers the early message again, to the dev server's worker.
	q, err := s.srv.Env.JobsQueue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send(t.Context(), faultStartMessage(early), 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the early session's replacement launched and recorded", func() bool {
		got, err := store.Get(t.Context(), early)
		return err == nil && got.SandboxRef != ""
	})
	release()
	eventually(t, 30*time.Second, "the early session ready", live(early, earlyTok))
	// The lost sandbox holds a code and a generation that no longer work.
	eventually(t, 30*time.Second, "the early session's lost sandbox stopped by itself", func() bool {
		return !slices.Contains(s.srv.Launcher.Running(), lostEarly)
	})
	// The late message comes back; then, at least once, both again, at once.
	worker := faultWorker(t, s)
	faultDeliver(t, worker, "start-"+late, faultStartMessage(late))
	faultDeliver(t, worker, "start-"+early, faultStartMessage(early), faultStartMessage(early))
	faultDeliver(t, worker, "start-"+late, faultStartMessage(late), faultStartMessage(late))

	running := s.srv.Launcher.Running()
	for _, c := range []struct {
		id, lost    string
		gen         int
		launches    []string
		replacement bool
	}{
		{early, lostEarly, 2, []string{early + "-1", early + "-2"}, true},
		{late, lostLate, 1, []string{late + "-1"}, false},
	} {
		got, err := store.Get(t.Context(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(session.Running, got.State) || got.Generation != c.gen || !slices.Contains(running, got.SandboxRef) ||
			(got.SandboxRef == c.lost) == c.replacement {
			t.Errorf("session %s: %s (%s) in generation %d on %q (running %v, lost %s); want running in generation %d on its one sandbox",
				c.id, got.State, got.Reason, got.Generation, got.SandboxRef, running, c.lost, c.gen)
		}
		if l := faultLaunches(s, c.id); !slices.Equal(l, c.launches) {
			t.Errorf("session %s: launches %v, want %v", c.id, l, c.launches)
		}
	}
	if len(running) != 2 {
		t.Errorf("running %v, want the two sessions' sandboxes", running)
	}
}

// TestFaultMessageDeliveredThreeTimes: SQS delivers at least once; here the
// same message three times, at once.
func TestFaultMessageDeliveredThreeTimes(t *testing.T) {
	t.Log(`nothing lost, nothing doubled: a session.start delivered three times launches one sandbox (one launch, one "sandbox launched" line) ` +
		`and the session gets ready on it; a job created three times by the orchestrator (the same plan step) and whose job.run is delivered ` +
		`three times is one job record, one session, one sandbox, one job.created event`)
	t.Parallel()
	s := start(t, faultLongSandbox())
	worker := faultWorker(t, s)

	// session.start, three times.
	id, tok := faultProvisioning(t, s)
	faultDeliver(t, worker, "start-"+id, faultStartMessage(id), faultStartMessage(id), faultStartMessage(id))
	got, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	running := s.srv.Launcher.Running()
	if len(running) != 1 || got.SandboxRef != running[0] || got.Generation != 1 {
		t.Fatalf("running %v, session on %q generation %d: want one sandbox, recorded", running, got.SandboxRef, got.Generation)
	}
	if n := faultLogLines(s, `"sandbox launched"`, id); n != 1 {
		t.Errorf("%d launches logged, want 1", n)
	}
	if _, err := faultBecomeReady(t.Context(), s, id); err != nil {
		t.Fatal(err)
	}
	if r := s.alive(id, tok); r.body["alive"] != true || r.str("state") != "ready" {
		t.Errorf("alive: %s", r.raw)
	}
	if l := faultLaunches(s, id); !slices.Equal(l, []string{id + "-1"}) {
		t.Errorf("launches %v, want one", l)
	}

	// A job: the orchestrator's create three times at once (its retries).
	o := newOrchestrator(s)
	step := uuid.NewString()
	agent := o.putProfile(t, step)
	created := make([]reply, 3)
	var wg sync.WaitGroup
	for i := range created {
		wg.Go(func() { created[i] = o.call(http.MethodPost, "/internal/jobs", o.jobBody(agent, step, 1000), step) })
	}
	wg.Wait()
	job := created[0].str("id")
	for i, r := range created {
		if (r.status != http.StatusCreated && r.status != http.StatusOK) || r.str("id") != job || job == "" {
			t.Fatalf("create %d: %d %s, want job %s", i, r.status, r.raw, job)
		}
	}
	// job.run came through the queue once; SQS delivers it twice more.
	sid := s.jobSession(t, job)
	run, _ := json.Marshal(jobqueue.Message{Type: jobqueue.JobRun, JobID: job})
	faultDeliver(t, worker, "run-"+job, string(run), string(run))

	out, err := awsconfig.NewDynamoDB(s.srv.Env.AWS).Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(s.srv.Env.Resources.Jobs.Name),
		ConsistentRead: aws.Bool(true), FilterExpression: aws.String("begins_with(job_id, :job)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":job": &ddbtypes.AttributeValueMemberS{Value: "job#"}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != 1 {
		t.Errorf("%d job records, want 1", out.Count)
	}
	var jobSessions []session.Session
	for _, sess := range faultSessions(t, s) {
		if sess.JobID != "" {
			jobSessions = append(jobSessions, sess)
		}
	}
	running = s.srv.Launcher.Running()
	if len(jobSessions) != 1 || jobSessions[0].ID != sid || jobSessions[0].JobID != job || !slices.Contains(running, jobSessions[0].SandboxRef) {
		t.Errorf("job sessions %+v (running %v), want the job's one, on its sandbox", jobSessions, running)
	}
	if l := faultLaunches(s, sid); !slices.Equal(l, []string{sid + "-1"}) || len(running) != 2 {
		t.Errorf("the job's launches %v, running %v: want one launch, two sandboxes in all", l, running)
	}
	wantTypes(t, s.jobEvents(t, job, 1), jobevents.Created)
}

// TestFaultDynamoDBStoppedMidRun: DynamoDB goes down while agents start,
// messages are being sent and a sandbox reports; then it comes back.
func TestFaultDynamoDBStoppedMidRun(t *testing.T) {
	t.Log(`nothing lost: while DynamoDB is down each route answers 503 service_unavailable with retry_after; once it is back, ` +
		`with no restart, each request retried as the API says (the same Idempotency-Key, client_message_id, append id) is done once: ` +
		`every message sent is in the agent's events exactly once, the sandbox's event once, each create is one agent, ready, ` +
		`and the sessions are exactly those agents, each on its one running sandbox: nothing half-written, nothing doubled`)
	// Not parallel: the outage points the process's AWS endpoints at links.
	o := startOutage(t, faultLongSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 30 * time.Second }))
	s := o.stack
	ctx := t.Context()
	a, aTok, aSb, _ := s.readySandbox(t, createBody("Hello"))

	// Two agents starting: their sandboxes run, their creates wait on them.
	started := map[string]chan reply{"fault-b1": make(chan reply, 1), "fault-b2": make(chan reply, 1)}
	for key, ch := range started {
		go func() {
			r, err := faultCall(ctx, s, http.MethodPost, "/api/remote_agents/create", appKey, createBody("Hello"), "Idempotency-Key", key)
			if err != nil {
				t.Error(err)
			}
			ch <- r
		}()
	}
	b1 := s.firstSandboxExcept(t, map[string]bool{a: true})
	b2 := s.firstSandboxExcept(t, map[string]bool{a: true, b1: true})
	b1Sb := s.sandboxToken(t, b1)

	// Messages to A, three senders at once; DynamoDB stops after the fifth
	// is queued, with others on their way. Each sender stops at its first 503.
	var (
		mu     sync.Mutex
		sent   = map[string]int{} // client_message_id: first answer's status
		next   atomic.Int32
		queued atomic.Int32
		once   sync.Once
		wg     sync.WaitGroup
	)
	cut := make(chan struct{})
	for range 3 {
		wg.Go(func() {
			for {
				mid := fmt.Sprintf("m%03d", next.Add(1)-1)
				r, err := faultCall(ctx, s, http.MethodPost, "/api/remote_agents/"+a+"/messages", aTok, map[string]any{"text": "message " + mid, "client_message_id": mid})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				sent[mid] = r.status
				mu.Unlock()
				switch r.status {
				case http.StatusOK:
					if queued.Add(1) == 5 {
						once.Do(func() { close(cut) })
					}
				case http.StatusServiceUnavailable:
					wantUnavailable(t, "message "+mid, r)
					return
				default:
					t.Errorf("message %s: %d %s, want 200 or 503", mid, r.status, r.raw)
					return
				}
			}
		})
	}
	<-cut
	o.links[devserver.DependencyDynamoDB].cut()
	wg.Wait()

	// Down: whatever is asked answers 503, retryable, with its delay.
	for key, ch := range started {
		wantUnavailable(t, "create "+key+" waiting for its agent", <-ch)
	}
	wantUnavailable(t, "alive", s.alive(a, aTok))
	wantUnavailable(t, "a new create", s.create(createBody("Hello"), "Idempotency-Key", "fault-c"))
	agentEvent := map[string]any{"id": "fault-ev", "events": []any{map[string]any{"type": "agent.message", "data": map[string]any{"text": "said during the outage"}}}}
	wantUnavailable(t, "a sandbox's event", s.call(http.MethodPost, "/sandbox/"+a+"/events", aSb, agentEvent))
	wantUnavailable(t, "a sandbox's heartbeat", s.call(http.MethodPost, "/sandbox/"+b1+"/heartbeat", b1Sb, nil))

	// Back, on the same server: each request is retried as the API says.
	o.links[devserver.DependencyDynamoDB].mend()
	for mid, status := range sent {
		if status == http.StatusOK {
			continue
		}
		if r := s.call(http.MethodPost, "/api/remote_agents/"+a+"/messages", aTok, map[string]any{"text": "message " + mid, "client_message_id": mid}); r.status != http.StatusOK {
			t.Errorf("message %s retried: %d %s", mid, r.status, r.raw)
		}
	}
	var seq []float64
	for range 2 {
		r := s.call(http.MethodPost, "/sandbox/"+a+"/events", aSb, agentEvent)
		if r.status != http.StatusOK {
			t.Fatalf("the sandbox's event retried: %d %s", r.status, r.raw)
		}
		first, _ := r.body["first_seq"].(float64)
		seq = append(seq, first)
	}
	if seq[0] != seq[1] {
		t.Errorf("the event's retries got seqs %v, want one", seq)
	}
	stop := faultSandboxes(t, s, a, b1) // B2's sandbox, and C's
	spec := s.call(http.MethodGet, "/sandbox/"+b1+"/spec", b1Sb, nil)
	hash, _ := spec.body["guardrails"].(map[string]any)["hash"].(string)
	if r := s.call(http.MethodPost, "/sandbox/"+b1+"/status", b1Sb, map[string]any{"state": "ready", "guardrails_hash": hash}); r.status != http.StatusOK {
		t.Fatalf("B1 ready: %d %s", r.status, r.raw)
	}
	agents := map[string]string{}
	for _, key := range []string{"fault-b1", "fault-b2", "fault-c"} {
		r := s.create(createBody("Hello"), "Idempotency-Key", key)
		if r.status != http.StatusOK || r.str("status") != "ready" {
			t.Fatalf("create %s retried: %d %s", key, r.status, r.raw)
		}
		agents[key] = r.str("agent_id")
	}
	for id, err := range stop() {
		t.Errorf("acting as the sandbox of %s: %v", id, err)
	}
	if got := []string{agents["fault-b1"], agents["fault-b2"]}; !slices.Contains(got, b1) || !slices.Contains(got, b2) {
		t.Errorf("the retried creates answered agents %v, want the two that were starting, %s and %s", got, b1, b2)
	}

	// The agent's events: every message once, the sandbox's event once.
	evs, err := s.srv.Env.SessionStore().Events(ctx, a, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	messages := map[string]int{}
	said, last := 0, int64(0)
	for _, e := range evs {
		if e.Seq <= last {
			t.Errorf("event %d after %d", e.Seq, last)
		}
		last = e.Seq
		switch e.Type {
		case "user.message":
			mid, _ := e.Data["client_message_id"].(string)
			messages[mid]++
			if e.Data["text"] != "message "+mid {
				t.Errorf("message %s reads %q", mid, e.Data["text"])
			}
		case "agent.message":
			said++
		}
	}
	if len(messages) != len(sent) {
		t.Errorf("%d messages in the events, %d sent", len(messages), len(sent))
	}
	for mid, status := range sent {
		if messages[mid] != 1 {
			t.Errorf("message %s (first answered %d) is in the events %d times", mid, status, messages[mid])
		}
	}
	if said != 1 {
		t.Errorf("the sandbox's event is in the events %d times", said)
	}
	t.Logf("%d messages sent, %d queued before the outage; %d events", len(sent), queued.Load(), len(evs))

	// The sessions: the four agents, ready, each on its sandbox.
	live := faultNoOrphans(t, s)
	var ids []string
	for _, sess := range live {
		ids = append(ids, sess.ID)
		if sess.State != session.Ready {
			t.Errorf("agent %s is %s", sess.ID, sess.State)
		}
	}
	want := []string{a, agents["fault-b1"], agents["fault-b2"], agents["fault-c"]}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) || len(faultSessions(t, s)) != 4 {
		t.Errorf("live sessions %v, want exactly the agents %v", ids, want)
	}
}

// TestFaultPoisonMessageGoesToTheDLQ: messages that can never be handled, on
// a jobs queue of the real emulator whose redrive policy moves a message to
// its DLQ after three receives (one second apart, its visibility timeout).
func TestFaultPoisonMessageGoesToTheDLQ(t *testing.T) {
	t.Log(`nothing lost: a poison message is neither dropped nor retried forever: a malformed one is dead-lettered by jobworker on its first ` +
		`delivery; one whose every handling fails is handled exactly maxReceiveCount (3) times and then moved to the DLQ by the queue's ` +
		`redrive policy; the DLQ holds each exactly once, its body intact, and a good message sent between them is handled once (one sandbox)`)
	t.Parallel()
	env := awstest.UniqueEnv(t)
	set, err := resources.For(env)
	if err != nil {
		t.Fatal(err)
	}
	// Redelivered soon, but not before a loaded machine has handled the
	// good message (a sandbox's launch): a handling that outlives the
	// visibility timeout is redelivered, and one redelivered past the
	// count is dead-lettered too.
	set.JobsQueue.VisibilityTimeout, set.JobsQueue.MaxReceiveCount = 5*time.Second, 3
	report, err := bootstrap.Run(t.Context(), bootstrap.ClientsFor(awstest.Config(t)), set)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, faultEnv(env), faultLongSandbox())
	dlq := sqsqueue.New(awsconfig.NewSQS(awstest.Config(t)), report.QueueURLs[set.JobsQueue.DeadLetterName])
	q, err := s.srv.Env.JobsQueue(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// A session whose record no release can read (a generation that is no
	// number): its start fails each time.
	broken := uuid.NewString()
	if _, err := awsconfig.NewDynamoDB(awstest.Config(t)).PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(set.Sessions.Name),
		Item: map[string]ddbtypes.AttributeValue{"session_id": &ddbtypes.AttributeValueMemberS{Value: broken},
			"state": &ddbtypes.AttributeValueMemberS{Value: "provisioning"}, "generation": &ddbtypes.AttributeValueMemberS{Value: "one"}}}); err != nil {
		t.Fatal(err)
	}
	good, _ := faultProvisioning(t, s)
	poison := map[string]string{} // message id: body
	for _, body := range []string{`{"type":"session.start","session_id":`, faultStartMessage(broken)} {
		id, err := q.Send(t.Context(), body, 0)
		if err != nil {
			t.Fatal(err)
		}
		poison[id] = body
		if len(poison) == 1 {
			if _, err := q.Send(t.Context(), faultStartMessage(good), 0); err != nil {
				t.Fatal(err)
			}
		}
	}

	dead := map[string]int{} // body: copies in the DLQ
	eventually(t, 90*time.Second, "both poison messages in the DLQ", func() bool {
		msgs, err := dlq.Receive(t.Context(), queue.MaxReceive, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			dead[m.Body]++
		}
		for _, body := range poison {
			if dead[body] == 0 {
				return false
			}
		}
		return true
	})
	if len(dead) != len(poison) {
		t.Errorf("the DLQ holds %v; want the poison messages only", dead)
	}
	if msgs, err := dlq.Receive(t.Context(), queue.MaxReceive, time.Second); err != nil || len(msgs) != 0 {
		t.Errorf("more in the DLQ: %+v %v", msgs, err)
	}
	for id, body := range poison {
		if dead[body] != 1 {
			t.Errorf("message %s (%s) is in the DLQ %d times", id, body, dead[body])
		}
		// Failed handlings, and dead-letterings by the worker: the malformed
		// one is the worker's to dead-letter, the failing one the queue's.
		got := [2]int{faultLogLines(s, `"job failed"`, id), faultLogLines(s, `"poison job message sent to the DLQ"`, id)}
		want := [2]int{0, 1}
		if strings.Contains(body, broken) {
			want = [2]int{set.JobsQueue.MaxReceiveCount, 0}
		}
		if got != want {
			t.Errorf("message %s (%s): %d failed handlings, dead-lettered by the worker %d times; want %d and %d", id, body, got[0], got[1], want[0], want[1])
		}
	}
	got, err := s.srv.Env.SessionStore().Get(t.Context(), good)
	running := s.srv.Launcher.Running()
	if err != nil || got.SandboxRef == "" || !slices.Equal(running, []string{got.SandboxRef}) || faultLogLines(s, `"sandbox launched"`, good) != 1 {
		t.Errorf("the good message: session %+v %v, running %v; want its one sandbox launched once", got, err, running)
	}
}

// TestFaultConcurrentCreates: 200 creates at once, under the platform's
// default quotas, each agent's sandbox a light process the test acts as.
func TestFaultConcurrentCreates(t *testing.T) {
	const n = 200
	t.Log(`nothing lost: each of 200 concurrent creates answers 200 with a ready agent, or one of the create route's documented ` +
		`answers to load: 408 (still starting), 429 (quota), 503 (unavailable), and the counts add up to 200; each 408 or 503 ` +
		`retried with its Idempotency-Key ends 200 or 429; afterwards the live sessions are exactly the agents answered 200, ` +
		`each alive and ready on its one running sandbox, and no sandbox runs for anything else`)
	t.Parallel()
	s := start(t, faultLongSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	stop := faultSandboxes(t, s)
	create := func(i int) reply {
		r, err := faultCall(t.Context(), s, http.MethodPost, "/api/remote_agents/create", appKey, createBody("Hello"), "Idempotency-Key", fmt.Sprintf("fault-create-%03d", i))
		if err != nil {
			t.Error(err)
		}
		return r
	}
	began := time.Now()
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { replies[i] = create(i) })
	}
	wg.Wait()
	counts := map[int]int{}
	for i, r := range replies {
		counts[r.status]++
		switch r.status {
		case http.StatusOK:
			if r.str("status") != "ready" || r.str("agent_id") == "" || r.str("session_token") == "" {
				t.Errorf("create %d: 200 %s", i, r.raw)
			}
		case http.StatusRequestTimeout:
			wantError(t, r, r.status, "agent_creation_timeout")
		case http.StatusTooManyRequests:
			wantError(t, r, r.status, "quota_exceeded")
		case http.StatusServiceUnavailable:
			wantError(t, r, r.status, "service_unavailable")
		default:
			t.Errorf("create %d: %d %s, which the create route does not document for load", i, r.status, r.raw)
		}
	}
	ok, timedOut, over, down := counts[http.StatusOK], counts[http.StatusRequestTimeout], counts[http.StatusTooManyRequests], counts[http.StatusServiceUnavailable]
	t.Logf("%d creates in %s: %d ready, %d 408, %d 429, %d 503", n, time.Since(began).Round(time.Millisecond), ok, timedOut, over, down)
	if ok+timedOut+over+down != n {
		t.Errorf("%d + %d + %d + %d != %d", ok, timedOut, over, down, n)
	}
	if ok+timedOut == 0 {
		t.Error("no create was admitted")
	}

	// The documented retry, all at once: the same Idempotency-Key.
	for i := range replies {
		wg.Go(func() {
			for tries := 0; replies[i].status == http.StatusRequestTimeout || replies[i].status == http.StatusServiceUnavailable; tries++ {
				if tries == 5 {
					t.Errorf("create %d still %d after %d retries", i, replies[i].status, tries)
					return
				}
				replies[i] = create(i)
			}
			if st := replies[i].status; st != http.StatusOK && st != http.StatusTooManyRequests {
				t.Errorf("create %d retried: %d %s", i, st, replies[i].raw)
			}
		})
	}
	wg.Wait()
	failed := stop()

	var agents []string
	for _, r := range replies {
		if r.status != http.StatusOK {
			continue
		}
		id := r.str("agent_id")
		agents = append(agents, id)
		if a := s.alive(id, r.str("session_token")); a.body["alive"] != true || a.str("state") != "ready" {
			t.Errorf("agent %s: %s", id, a.raw)
		}
	}
	var live []string
	for _, sess := range faultNoOrphans(t, s) {
		live = append(live, sess.ID)
	}
	slices.Sort(agents)
	slices.Sort(live)
	if !slices.Equal(agents, live) || len(agents) != len(slices.Compact(slices.Clone(agents))) {
		t.Errorf("%d agents answered 200, %d live sessions: want the same", len(agents), len(live))
	}
	for id, err := range failed {
		if slices.Contains(live, id) {
			t.Errorf("acting as the sandbox of live %s: %v", id, err)
		}
	}
	t.Logf("%d agents, %d sandboxes running", len(agents), len(s.srv.Launcher.Running()))
}

// faultECSEvent is the EventBridge "ECS Task State Change" event of a
// sandbox task (package jobqueue's testdata) of session id's generation gen, in
// status (RUNNING or STOPPED).
func faultECSEvent(t *testing.T, id string, gen int, task, status string) string {
	t.Helper()
	raw, err := os.ReadFile("../../shared/jobqueue/testdata/ecs-task-stopped.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ev["id"] = uuid.NewString()
	d := ev["detail"].(map[string]any)
	d["startedBy"], d["group"], d["taskArn"], d["lastStatus"] = id, fmt.Sprintf("%s%d", jobqueue.ECSGroupPrefix, gen), task, status
	if status != "STOPPED" {
		d["desiredStatus"] = "RUNNING"
		delete(d, "stoppedReason")
		delete(d, "stopCode")
		d["containers"] = []any{map[string]any{"name": "agent", "lastStatus": status, "taskArn": task}}
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestFaultDuplicateAndOutOfOrderTaskEvents: EventBridge delivers ECS task
// events at least once and in no promised order.
func TestFaultDuplicateAndOutOfOrderTaskEvents(t *testing.T) {
	t.Log(`nothing lost, nothing doubled: whatever the order and the copies of a task's RUNNING and STOPPED events, the session ends in the ` +
		`state its first STOPPED means (ended crashed if it ran, ended shutdown if it was ending, failed if it never reported), ` +
		`with one end recorded (one end metric line, ended_at kept), a STOPPED of an earlier generation's task ends nothing, ` +
		`and no event is reported failed (none retried, none dead-lettered)`)
	t.Parallel()
	s := start(t)
	store := s.srv.Env.SessionStore()
	handle := faultWorker(t, s)
	ends := func(id string) int {
		return faultLogLines(s, `"msg":"metrics"`, `"SessionSeconds"`, `"session_id":"`+id+`"`)
	}
	stored := func(state session.State, gen int) string {
		id := uuid.NewString()
		now := time.Now().UTC()
		if err := store.Create(t.Context(), session.Session{ID: id, Blueprint: session.Blueprint{
			ProjectName:     "demo",
			PersonaSlug:     "assistant",
			InitialPrompt:   "Hello",
			TmuxSessionName: "ra-" + id[:8],
		},

			State: state, Generation: gen, CreatedAt: now, UpdatedAt: now, HeartbeatAt: now}, nil); err != nil {
			t.Fatal(err)
		}
		return id
	}
	task := func() string {
		return "arn:aws:ecs:us-east-1:111122223333:task/ra-test/" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}

	cases := []struct {
		name       string
		state      session.State
		gen        int
		events     func(id string) [][]string // deliveries in turn; each turn's at once
		endsAt     int                        // the turn that ends the session
		want       session.State
		wantReason session.Reason
	}{
		{"running, STOPPED twice, RUNNING after", session.Ready, 1, func(id string) [][]string {
			arn := task()
			return [][]string{{faultECSEvent(t, id, 1, arn, "RUNNING")}, {faultECSEvent(t, id, 1, arn, "STOPPED"), faultECSEvent(t, id, 1, arn, "STOPPED")},
				{faultECSEvent(t, id, 1, arn, "STOPPED")}, {faultECSEvent(t, id, 1, arn, "RUNNING")}}
		}, 1, session.Ended, session.ReasonCrashed},
		{"ending, STOPPED three times at once", session.Ending, 1, func(id string) [][]string {
			arn := task()
			stop := faultECSEvent(t, id, 1, arn, "STOPPED")
			return [][]string{{stop, stop, stop}, {faultECSEvent(t, id, 1, arn, "RUNNING")}}
		}, 0, session.Ended, session.ReasonShutdown},
		{"provisioning, STOPPED before RUNNING", session.Provisioning, 1, func(id string) [][]string {
			arn := task()
			return [][]string{{faultECSEvent(t, id, 1, arn, "STOPPED")}, {faultECSEvent(t, id, 1, arn, "RUNNING"), faultECSEvent(t, id, 1, arn, "STOPPED")}}
		}, 0, session.Failed, session.ReasonError},
		{"relaunched, the lost task's STOPPED late", session.Ready, 2, func(id string) [][]string {
			lost, arn := task(), task()
			return [][]string{{faultECSEvent(t, id, 1, lost, "STOPPED"), faultECSEvent(t, id, 2, arn, "RUNNING")}, {faultECSEvent(t, id, 1, lost, "STOPPED")},
				{faultECSEvent(t, id, 2, arn, "STOPPED"), faultECSEvent(t, id, 1, lost, "RUNNING")}, {faultECSEvent(t, id, 2, arn, "STOPPED")}}
		}, 2, session.Ended, session.ReasonCrashed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := stored(c.state, c.gen)
			var endedAt time.Time
			for turn, bodies := range c.events(id) {
				faultDeliver(t, handle, fmt.Sprintf("task-%s-%d", id, turn), bodies...)
				got, err := store.Get(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if got.State.Terminal() != (turn >= c.endsAt) {
					t.Fatalf("after turn %d: session %s (%s); want it to end at turn %d", turn, got.State, got.Reason, c.endsAt)
				}
				if !got.State.Terminal() {
					continue
				}
				if endedAt.IsZero() {
					endedAt = got.EndedAt
				} else if !got.EndedAt.Equal(endedAt) {
					t.Errorf("turn %d: ended again at %s (first %s)", turn, got.EndedAt, endedAt)
				}
			}
			got, err := store.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != c.want || got.Reason != c.wantReason || got.Generation != c.gen {
				t.Errorf("session %s (%s), generation %d; want %s (%s)", got.State, got.Reason, got.Generation, c.want, c.wantReason)
			}
			if n := ends(id); n != 1 {
				t.Errorf("%d ends recorded, want 1", n)
			}
		})
	}
	if n := faultLogLines(s, `"job failed"`); n != 0 {
		t.Errorf("%d task events failed", n)
	}
}
