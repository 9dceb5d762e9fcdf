package toolgate_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/toolgate"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// The crash test runs the first caller in a child process of this test binary
// and kills it mid-handler; crashHelperEnv tells the child what to do.
const crashHelperEnv = "TOOLGATE_CRASH_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashHelperEnv); spec != "" {
		os.Exit(crashHelper(spec))
	}
	awstest.Main(m)
}

// counting is an Executor that counts its runs, optionally waiting for block to
// close or failing the first fail runs.
type counting struct {
	runs  atomic.Int32
	fail  atomic.Int32
	block chan struct{}
}

func (c *counting) Execute(ctx context.Context, call toolgate.Call) (toolgate.Result, error) {
	n := c.runs.Add(1)
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return toolgate.Result{}, ctx.Err()
		}
	}
	if c.fail.Add(-1) >= 0 {
		return toolgate.Result{}, errors.New("dynamodb is down")
	}
	return toolgate.Result{Success: true, Result: fmt.Sprintf("ran %s for %s (run %d)", call.Tool, call.CallID, n), Data: map[string]any{"run": n}}, nil
}

type harness struct {
	set      resources.Set
	sessions *dynamo.Sessions
	records  *dynamo.ToolCalls
	tools    *sqsqueue.Queue
	exec     *counting
	sess     session.Session
	token    string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	set, report := awstest.Resources(t)
	cfg := awstest.Config(t)
	ddb := awsconfig.NewDynamoDB(cfg)
	h := &harness{
		set:      set,
		sessions: dynamo.NewSessions(ddb, set.Sessions.Name, set.Idempotency.Name, set.Events.Name),
		records:  dynamo.NewToolCalls(ddb, set.Idempotency.Name),
		tools:    sqsqueue.New(awsconfig.NewSQS(cfg), report.QueueURLs[set.ToolsQueue.Name]),
		exec:     &counting{},
	}
	h.sess, h.token = h.newSession(t, "coding")
	return h
}

// newSession writes a ready session whose sandbox holds the returned token.
func (h *harness) newSession(t *testing.T, sessionType string) (session.Session, string) {
	t.Helper()
	plain, hash := token.New(token.Sandbox)
	now := time.Now().UTC()
	id := newUUID(t)
	s := session.Session{ID: id, State: session.Ready, Generation: 1, Blueprint: session.Blueprint{
		SessionType:     sessionType,
		ConfigurationID: "cfg",
		TmuxSessionName: "ra-x",
	},

		SandboxTokenHash: hash, CreatedAt: now, UpdatedAt: now}
	if err := h.sessions.Create(t.Context(), s, nil); err != nil {
		t.Fatal(err)
	}
	return s, plain
}

// newUUID returns a random version 4 UUID, the shape of session ids.
func newUUID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

func (h *harness) service(o toolgate.Options) *toolgate.Service {
	o.Sessions = h.sessions
	if o.Records == nil {
		o.Records = h.records
	}
	if o.Executor == nil {
		o.Executor = h.exec
	}
	if o.Queue == nil {
		o.Queue = h.tools
	}
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return toolgate.New(o)
}

func (h *harness) req(tool, id, args string) toolgate.Request {
	return toolgate.Request{SessionID: h.sess.ID, Tool: tool, Token: h.token, ToolCallID: id, Args: json.RawMessage(args)}
}

const complete = `{"run_id":"run-1","completion_id":"c-1","outcome":"succeeded"}`

func within(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// duplicates is a record store that closes all once want requests have found
// their record already begun.
type duplicates struct {
	toolgate.Store
	want int32
	seen atomic.Int32
	all  chan struct{}
}

func (d *duplicates) Begin(ctx context.Context, rec toolgate.Record, now time.Time) (toolgate.Record, bool, error) {
	cur, created, err := d.Store.Begin(ctx, rec, now)
	if err == nil && !created && d.seen.Add(1) == d.want {
		close(d.all)
	}
	return cur, created, err
}

// 100 concurrent duplicates: the side effect happens once, and all 100 callers
// get the same result; all but the one that ran it see it as replayed.
func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 100
	// The call runs until every duplicate has found it in progress.
	dups := &duplicates{Store: h.records, want: n - 1, all: make(chan struct{})}
	h.exec.block = dups.all
	svc := h.service(toolgate.Options{Records: dups})
	outs := make([]toolgate.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			outs[i], errs[i] = svc.Call(within(t, 20*time.Second), h.req(toolspec.AutomationComplete, fmt.Sprintf("call-%d", i), complete))
		})
	}
	wg.Wait()
	if got := h.exec.runs.Load(); got != 1 {
		t.Fatalf("the side effect ran %d times, want 1", got)
	}
	fresh := 0
	for i := range n {
		if errs[i] != nil || outs[i].Pending != nil || outs[i].Result == nil {
			t.Fatalf("caller %d: %+v, %v", i, outs[i], errs[i])
		}
		if outs[i].Result.Result != outs[0].Result.Result {
			t.Errorf("caller %d got %q, caller 0 %q", i, outs[i].Result.Result, outs[0].Result.Result)
		}
		if !outs[i].Replayed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d callers saw a fresh result, want 1", fresh)
	}
	// automation.complete is keyed by completion_id, whatever the tool_call_id.
	if !strings.Contains(outs[0].Result.Result, "for c-1") {
		t.Errorf("result %q not keyed by completion_id", outs[0].Result.Result)
	}
}

func TestSameKeyDifferentPayloadIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	svc := h.service(toolgate.Options{})
	first, err := svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "x", complete))
	if err != nil || first.Replayed {
		t.Fatalf("first: %+v %v", first, err)
	}
	_, err = svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "x", `{"run_id":"run-1","completion_id":"c-1","outcome":"failed"}`))
	wantCode(t, err, apierror.IdempotencyKeyReused)
	again, err := svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "y", complete))
	if err != nil || !again.Replayed || again.Result.Result != first.Result.Result {
		t.Errorf("replay: %+v %v", again, err)
	}
	// The same tool_call_id for another tool, or in another session, is another call.
	other, tok := h.newSession(t, "coding")
	r := h.req(toolspec.AutomationComplete, "x", complete)
	r.SessionID, r.Token = other.ID, tok
	if out, err := svc.Call(t.Context(), r); err != nil || out.Replayed {
		t.Errorf("other session: %+v %v", out, err)
	}
	if got := h.exec.runs.Load(); got != 2 {
		t.Errorf("runs %d, want 2", got)
	}
}

func wantCode(t *testing.T, err error, code apierror.Code) {
	t.Helper()
	if got := apierror.CodeOf(err); got != code {
		t.Errorf("error %v (%s), want %s", err, got, code)
	}
}

// crashHelper is the child process of the crash test: it starts the call with
// a deadline of the given seconds, says so, and hangs in the tool until killed.
func crashHelper(spec string) int {
	var in struct {
		Env, Session, Token string
		Seconds             int
	}
	if err := json.Unmarshal([]byte(spec), &in); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	set, err := resources.For(in.Env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ddb := awsconfig.NewDynamoDB(cfg)
	hang := make(chan struct{})
	svc := toolgate.New(toolgate.Options{
		Sessions: dynamo.NewSessions(ddb, set.Sessions.Name, set.Idempotency.Name, set.Events.Name),
		Records:  dynamo.NewToolCalls(ddb, set.Idempotency.Name),
		Executor: executorFunc(func(context.Context, toolgate.Call) (toolgate.Result, error) {
			fmt.Println("started")
			<-hang
			return toolgate.Result{}, nil
		}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(in.Seconds)*time.Second)
	defer cancel()
	_, _ = svc.Call(ctx, toolgate.Request{SessionID: in.Session, Tool: toolspec.AutomationComplete, Token: in.Token, ToolCallID: "crash", Args: json.RawMessage(complete)})
	return 0
}

type executorFunc func(context.Context, toolgate.Call) (toolgate.Result, error)

func (f executorFunc) Execute(ctx context.Context, c toolgate.Call) (toolgate.Result, error) {
	return f(ctx, c)
}

// The first caller dies mid-handler (SIGKILL): a duplicate before its deadline
// does not run the tool; one after the deadline runs it exactly once more.
func TestCrashedCallerRunsAgainOnlyAfterItsDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// The crashed caller's lease is long, so that a loaded machine checks the
	// early duplicate well inside it; the clock, not waiting, passes it.
	const leaseSeconds = 60
	spec, _ := json.Marshal(map[string]any{"Env": h.set.Env, "Session": h.sess.ID, "Token": h.token, "Seconds": leaseSeconds})
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), crashHelperEnv+"="+string(spec))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "started" {
		_ = child.Process.Kill()
		t.Fatalf("child: %q %v", line, err)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	// The duplicates' clock runs from now; it is moved past the crashed caller's
	// deadline rather than waited past it.
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	// The margin leaves the last read of the record time to finish on a busy machine.
	svc := h.service(toolgate.Options{Margin: 3 * time.Second, Now: clock})
	early, err := svc.Call(within(t, 10*time.Second), h.req(toolspec.AutomationComplete, "crash", complete))
	if err != nil || early.Pending == nil {
		t.Fatalf("duplicate before the deadline: %+v %v", early, err)
	}
	if h.exec.runs.Load() != 0 {
		t.Fatal("the tool ran again before the crashed caller's deadline")
	}
	if time.Since(began) > leaseSeconds*time.Second {
		t.Fatal("too slow to check before the deadline")
	}
	key := toolgate.RecordKey(h.sess.ID, toolspec.AutomationComplete, "c-1")
	crashed, err := h.records.Get(t.Context(), key)
	if err != nil || crashed.State != toolgate.InProgress || crashed.Attempt != 1 {
		t.Fatalf("crashed caller's record %+v %v", crashed, err)
	}
	// Past the crashed caller's deadline, a duplicate takes over.
	offset.Store(int64(time.Until(time.UnixMilli(crashed.LeaseUntil)) + time.Millisecond))
	late, err := svc.Call(within(t, 3*leaseSeconds*time.Second), h.req(toolspec.AutomationComplete, "crash", complete))
	if err != nil || late.Pending != nil || late.Replayed {
		t.Fatalf("duplicate after the deadline: %+v %v", late, err)
	}
	again, err := svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "crash", complete))
	if err != nil || !again.Replayed || again.Result.Result != late.Result.Result {
		t.Errorf("replay: %+v %v", again, err)
	}
	rec, err := h.records.Get(t.Context(), key)
	if err != nil || rec.Attempt != 2 || rec.State != toolgate.Completed {
		t.Errorf("record %+v %v", rec, err)
	}
	if got := h.exec.runs.Load(); got != 1 {
		t.Errorf("ran %d times after the crash, want 1", got)
	}
}

// Completed records keep their result for the retention and then expire: the
// TTL attribute is set from the completion, and an expired record no longer
// replays (DynamoDB's TTL deletes lazily, so expiry is also checked on read).
func TestRecordsExpireByTTL(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	svc := h.service(toolgate.Options{Retention: 10 * time.Minute, Now: clock})
	before := time.Now()
	if _, err := svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "ttl", complete)); err != nil {
		t.Fatal(err)
	}
	rec, err := h.records.Get(t.Context(), toolgate.RecordKey(h.sess.ID, toolspec.AutomationComplete, "c-1"))
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before.Add(10*time.Minute).Unix(), time.Now().Add(10*time.Minute).Unix(); rec.ExpiresAt < lo || rec.ExpiresAt > hi {
		t.Errorf("expires_at %d, want within [%d, %d]", rec.ExpiresAt, lo, hi)
	}
	if h.set.Idempotency.TTLAttribute != "expires_at" {
		t.Errorf("idempotency table TTL attribute %q", h.set.Idempotency.TTLAttribute)
	}
	offset.Store(int64(9 * time.Minute))
	if out, _ := svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "ttl", complete)); !out.Replayed {
		t.Error("not replayed within the retention")
	}
	offset.Store(int64(11 * time.Minute))
	if out, err := svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "ttl", complete)); err != nil || out.Replayed {
		t.Errorf("after the retention: %+v %v", out, err)
	}
	if got := h.exec.runs.Load(); got != 2 {
		t.Errorf("runs %d, want 2", got)
	}
	if toolgate.New(toolgate.Options{Retention: time.Minute}) == nil {
		t.Fatal("no service")
	}
}

// A long tool goes on the tools queue; a caller that cannot wait gets 202 and
// polls with the same id; jobworker runs it once, however often it is delivered.
func TestLongToolRunsOnTheQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	svc := h.service(toolgate.Options{LongWait: 300 * time.Millisecond})
	args := `{"folder":"out"}`
	first, err := svc.Call(t.Context(), h.req(toolspec.Verify, "v1", args))
	if err != nil || first.Pending == nil || first.Pending.Status != "pending" || first.Pending.ToolCallID != "v1" {
		t.Fatalf("first: %+v %v", first, err)
	}
	poll, err := svc.Call(t.Context(), h.req(toolspec.Verify, "v1", args))
	if err != nil || poll.Pending == nil {
		t.Fatalf("poll while queued: %+v %v", poll, err)
	}
	msgs, err := h.tools.Receive(t.Context(), queue.MaxReceive, 2*time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("tools queue: %d messages, %v", len(msgs), err)
	}
	if !toolgate.IsJob(msgs[0].Body) {
		t.Fatalf("not a tool job: %s", msgs[0].Body)
	}
	for range 2 { // a redelivery runs nothing more
		if err := svc.RunQueued(t.Context(), msgs[0].Body); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.exec.runs.Load(); got != 1 {
		t.Fatalf("runs %d, want 1", got)
	}
	done, err := svc.Call(t.Context(), h.req(toolspec.Verify, "v1", args))
	if err != nil || done.Pending != nil || !done.Replayed || !done.Result.Success {
		t.Errorf("after the worker: %+v %v", done, err)
	}
	if err := svc.RunQueued(t.Context(), `{"type":"tool.run","key":"nope","attempt":1}`); !errors.Is(err, toolgate.ErrMalformed) {
		t.Errorf("malformed job: %v", err)
	}
}

// A tool that fails (not a tool-level failure: the platform failed) is not
// recorded as done: the caller gets a retryable error and the retry runs it.
func TestFailedRunIsRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.exec.fail.Store(1)
	svc := h.service(toolgate.Options{})
	_, err := svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "f", complete))
	if code := apierror.CodeOf(err); code != apierror.ServiceUnavailable {
		t.Fatalf("first: %v", err)
	}
	out, err := svc.Call(t.Context(), h.req(toolspec.AutomationComplete, "f", complete))
	if err != nil || out.Replayed || !out.Result.Success {
		t.Fatalf("retry: %+v %v", out, err)
	}
	if got := h.exec.runs.Load(); got != 2 {
		t.Errorf("runs %d, want 2", got)
	}
}

func TestCallsAreCheckedBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	setup, setupTok := h.newSession(t, "setup")
	_, otherTok := h.newSession(t, "coding")
	svc := h.service(toolgate.Options{})
	sessionTok, _ := token.New(token.Session)
	cmds := `{"commands":[{"name":"web","command":"npm start"}]}`
	cases := []struct {
		name string
		req  toolgate.Request
		code apierror.Code
	}{
		{"no token", toolgate.Request{SessionID: h.sess.ID, Tool: toolspec.Verify, ToolCallID: "a"}, apierror.Forbidden},
		{"session token", toolgate.Request{SessionID: h.sess.ID, Tool: toolspec.Verify, Token: sessionTok, ToolCallID: "a"}, apierror.Forbidden},
		{"garbage token", toolgate.Request{SessionID: h.sess.ID, Tool: toolspec.Verify, Token: "hello", ToolCallID: "a"}, apierror.Forbidden},
		{"another session's token", toolgate.Request{SessionID: h.sess.ID, Tool: toolspec.Verify, Token: otherTok, ToolCallID: "a"}, apierror.Forbidden},
		{"unknown session", toolgate.Request{SessionID: "not-a-session", Tool: toolspec.Verify, Token: h.token, ToolCallID: "a"}, apierror.Forbidden},
		{"unknown tool", h.req("rm_rf", "a", `{}`), apierror.NotFound},
		{"sandbox-local tool", h.req(toolspec.RequestEnvVariables, "a", `{"keys":[{"key":"A"}]}`), apierror.InvalidRequest},
		{"no tool_call_id", h.req(toolspec.Verify, "", `{}`), apierror.InvalidRequest},
		{"tool_call_id with spaces", h.req(toolspec.Verify, "a b", `{}`), apierror.InvalidRequest},
		{"tool_call_id too long", h.req(toolspec.Verify, strings.Repeat("a", 256), `{}`), apierror.InvalidRequest},
		{"invalid args", h.req(toolspec.Verify, "a", `{"folder":"../etc"}`), apierror.InvalidRequest},
		{"setup tool outside setup", h.req(toolspec.SaveServiceCommands, "a", cmds), apierror.Forbidden},
		{"setup tool with bad args in coding", h.req(toolspec.SaveEnvFiles, "a", `{"files":[]}`), apierror.InvalidRequest},
	}
	for _, c := range cases {
		_, err := svc.Call(t.Context(), c.req)
		if got := apierror.CodeOf(err); got != c.code {
			t.Errorf("%s: %v (%s), want %s", c.name, err, got, c.code)
		}
	}
	r := toolgate.Request{SessionID: setup.ID, Tool: toolspec.SaveServiceCommands, Token: setupTok, ToolCallID: "a", Args: json.RawMessage(cmds)}
	if out, err := svc.Call(t.Context(), r); err != nil || !out.Result.Success {
		t.Errorf("setup tool in a setup session: %+v %v", out, err)
	}
	if got := h.exec.runs.Load(); got != 1 {
		t.Errorf("runs %d, want 1 (only the setup session's call)", got)
	}
	// An ended session's sandbox token acts no more.
	if _, err := h.sessions.Transition(t.Context(), setup.ID, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonShutdown}); err != nil {
		t.Fatal(err)
	}
	r.ToolCallID = "b"
	_, err := svc.Call(t.Context(), r)
	wantCode(t, err, apierror.Forbidden)
}
