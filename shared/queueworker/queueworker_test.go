package queueworker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/queueworker"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
	"github.com/remote-agents/remote-agents/shared/tasksize"
	"github.com/remote-agents/remote-agents/shared/token"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// countingLauncher records launches and fails those of session "broken",
// and stops of the sandbox "pid:broken".
type countingLauncher struct {
	mu       sync.Mutex
	launches []launch.Spec
	stops    []string
}

func (l *countingLauncher) Launch(_ context.Context, spec launch.Spec) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if spec.SessionID == "broken" {
		return "", errors.New("no capacity")
	}
	l.launches = append(l.launches, spec)
	return "pid:1", nil
}

func (l *countingLauncher) Stop(_ context.Context, ref string, _ time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ref == "pid:broken" {
		return errors.New("ECS is unavailable")
	}
	l.stops = append(l.stops, ref)
	return nil
}

func setup(t *testing.T) (*queueworker.Worker, *dynamo.Sessions, *countingLauncher, *sqsqueue.Queue) {
	t.Helper()
	set, report := awstest.Resources(t)
	cfg := awstest.Config(t)
	store := dynamo.NewSessions(awsconfig.NewDynamoDB(cfg), set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	dlq := sqsqueue.New(awsconfig.NewSQS(cfg), report.QueueURLs[set.JobsQueue.DeadLetterName])
	l := &countingLauncher{}
	w := &queueworker.Worker{Store: store, Launcher: l, DLQ: dlq, GatewayURL: "http://gw", ModelGatewayURL: "http://model", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return w, store, l, dlq
}

func provisioning(t *testing.T, store *dynamo.Sessions, id string) {
	t.Helper()
	now := time.Now().UTC()
	if err := store.Create(t.Context(), session.Session{ID: id, State: session.Provisioning, Generation: 1, Blueprint: session.Blueprint{TmuxSessionName: "ra-x"}, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
}

func record(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body}
}

func TestBatchWithPoisonAndFailure(t *testing.T) {
	t.Parallel()
	w, store, l, dlq := setup(t)
	provisioning(t, store, "good")
	provisioning(t, store, "broken")
	// A sandbox the launcher cannot stop: its stop fails, and is retried.
	if _, err := store.Touch(t.Context(), "broken", 1, session.Fields{SandboxRef: "pid:broken"}); err != nil {
		t.Fatal(err)
	}
	res, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{
		record("m1", `{"type":"session.start","session_id":"good","generation":1}`),
		record("m2", `not json at all`),
		record("m3", `{"type":"session.stop","session_id":"broken","generation":1}`),
		record("m4", `{"type":"session.start","session_id":"unknown","generation":1}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.BatchItemFailures) != 1 || res.BatchItemFailures[0].ItemIdentifier != "m3" {
		t.Errorf("batch failures %+v, want only m3", res.BatchItemFailures)
	}
	msgs, err := dlq.Receive(t.Context(), 10, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Body != "not json at all" {
		t.Errorf("DLQ holds %+v, want the poison message", msgs)
	}
	got, err := store.Get(t.Context(), "good")
	if err != nil || got.SandboxRef != "pid:1" || len(got.BootstrapCodeHash) != 64 {
		t.Errorf("launched session %+v, %v", got, err)
	}
	if len(l.launches) != 1 || l.launches[0].GatewayURL != "http://gw" || l.launches[0].ModelGatewayURL != "http://model" || token.Check(token.Bootstrap, l.launches[0].BootstrapCode) != nil ||
		got.BootstrapCodeHash != token.Hash(l.launches[0].BootstrapCode) {
		t.Fatalf("launches %+v", l.launches)
	}
	// The launcher gets a one-time code, never a token: no sandbox token exists
	// until the sandbox spends the code, and the code lasts a while.
	if got.SandboxTokenHash != "" {
		t.Errorf("a sandbox token exists before the sandbox asked for it: %+v", got)
	}
	if left := time.Until(got.BootstrapExpires); left < queueworker.BootstrapTTL-time.Minute || left > queueworker.BootstrapTTL {
		t.Errorf("the code expires in %s, want about %s", left, queueworker.BootstrapTTL)
	}
	if _, ok := l.launches[0].Env()["SANDBOX_MCP_AUTH_TOKEN"]; ok {
		t.Errorf("the launch environment names a sandbox token: %v", l.launches[0].Env())
	}
}

func TestRedeliveredStartLaunchesOnce(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	provisioning(t, store, "s1")
	start := `{"type":"session.start","session_id":"s1","generation":1}`
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if res, err := w.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(string(rune('a'+i)), start)}}); err != nil || len(res.BatchItemFailures) > 0 {
				t.Errorf("delivery %d: %+v, %v", i, res, err)
			}
		})
	}
	wg.Wait()
	if _, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("late", start)}}); err != nil {
		t.Fatal(err)
	}
	if len(l.launches) != 1 {
		t.Errorf("%d launches for one session generation", len(l.launches))
	}
}

func TestTaskStoppedEndsSession(t *testing.T) {
	t.Parallel()
	w, store, _, _ := setup(t)
	provisioning(t, store, "s2")
	if _, err := store.Transition(t.Context(), "s2", session.Change{From: []session.State{session.Provisioning}, To: session.Ready}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{
		record("old", `{"type":"task.state","session_id":"s2","generation":7}`), // another generation: ignored
	}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get(t.Context(), "s2"); got.State != session.Ready {
		t.Fatalf("a stale generation's task ended the session: %+v", got)
	}
	if _, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{
		record("now", `{"type":"task.state","session_id":"s2","generation":1,"exit_code":137}`),
	}}); err != nil {
		t.Fatal(err)
	}
	got, _ := store.Get(t.Context(), "s2")
	if got.State != session.Ended || got.Reason != session.ReasonCrashed || got.EndedAt.IsZero() {
		t.Errorf("after task stopped: %+v", got)
	}
}

// addressBook is an Addresses in memory.
type addressBook struct {
	mu sync.Mutex
	at map[netip.Addr]launch.Address
	// forgotten is what Forget was asked.
	forgotten []launch.Address
}

func (b *addressBook) Record(_ context.Context, a launch.Address, _ time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.at[a.Addr] = a
	return nil
}

func (b *addressBook) Forget(_ context.Context, a launch.Address) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgotten = append(b.forgotten, a)
	if b.at[a.Addr].Ref == a.Ref {
		delete(b.at, a.Addr)
	}
	return nil
}

// A running task's address is recorded for the egress proxy, and forgotten
// when that task stops (not when another one at the address does).
func TestTaskAddressesAreRecorded(t *testing.T) {
	t.Parallel()
	w, store, _, _ := setup(t)
	book := &addressBook{at: map[netip.Addr]launch.Address{}}
	w.Addresses = book
	provisioning(t, store, "s4")
	ip := netip.MustParseAddr("10.0.1.23")
	handle := func(body string) {
		t.Helper()
		if res, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("m", body)}}); err != nil || len(res.BatchItemFailures) > 0 {
			t.Fatalf("%s: %v %+v", body, err, res)
		}
	}
	handle(`{"type":"task.running","session_id":"s4","generation":1,"sandbox_ref":"task/1","addr":"10.0.1.23"}`)
	if got := book.at[ip]; got != (launch.Address{Addr: ip, Sandbox: "s4", Ref: "task/1"}) {
		t.Fatalf("recorded %+v", got)
	}
	handle(`{"type":"task.state","session_id":"s4","generation":9,"sandbox_ref":"task/0","addr":"10.0.1.23"}`)
	if _, ok := book.at[ip]; !ok {
		t.Fatal("another task's stop forgot the address")
	}
	handle(`{"type":"task.state","session_id":"s4","generation":1,"sandbox_ref":"task/1","addr":"10.0.1.23"}`)
	if _, ok := book.at[ip]; ok {
		t.Fatal("the task's stop left its address")
	}
	// The sandbox's own record (where s4 is) goes with it.
	if got := book.forgotten[len(book.forgotten)-1]; got != (launch.Address{Addr: ip, Sandbox: "s4", Ref: "task/1"}) {
		t.Errorf("forgot %+v", got)
	}
}

// failingJobs is a JobRunner that records how its jobs failed.
type failingJobs struct {
	sizedJobs
	mu     sync.Mutex
	failed map[string]string
}

func (j *failingJobs) fail(id, how string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failed[id] = how
	return nil
}

func (j *failingJobs) Crashed(_ context.Context, id, _ string) error { return j.fail(id, "crash") }
func (j *failingJobs) OutOfMemory(_ context.Context, id, _ string) error {
	return j.fail(id, "memory_limit")
}
func (j *failingJobs) IsolationUnavailable(_ context.Context, id, msg string) error {
	return j.fail(id, "policy_violation: "+msg)
}

// A job's sandbox killed for its memory fails its job with memory_limit
// (the ECS container's OutOfMemoryError, or the process launcher's); one
// stopped otherwise, crash.
func TestJobSandboxKilledForItsMemory(t *testing.T) {
	t.Parallel()
	w, store, _, _ := setup(t)
	jobs := &failingJobs{failed: map[string]string{}}
	w.Jobs = jobs
	now := time.Now().UTC()
	for _, id := range []string{"oom", "other"} {
		if err := store.Create(t.Context(), session.Session{ID: id, Blueprint: session.Blueprint{JobID: "job-" + id, TmuxSessionName: "ra-x"}, State: session.Working, Generation: 1, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.TaskState, SessionID: "oom", Generation: 1, Detail: "Essential container in task exited; OutOfMemoryError: Container killed due to memory usage"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.TaskState, SessionID: "other", Generation: 1, Detail: "Essential container in task exited"}); err != nil {
		t.Fatal(err)
	}
	if jobs.failed["job-oom"] != "memory_limit" || jobs.failed["job-other"] != "crash" {
		t.Errorf("jobs failed %v, want memory_limit and crash", jobs.failed)
	}
}

func TestStopAfterGraceStopsSandbox(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	provisioning(t, store, "s3")
	if _, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("a", `{"type":"session.start","session_id":"s3","generation":1}`)}}); err != nil {
		t.Fatal(err)
	}
	for _, to := range []session.State{session.Ready, session.Ending} {
		if _, err := store.Transition(t.Context(), "s3", session.Change{From: session.Live, To: to, Reason: session.ReasonShutdown}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("b", `{"type":"session.stop","session_id":"s3","generation":1}`)}}); err != nil {
		t.Fatal(err)
	}
	got, _ := store.Get(t.Context(), "s3")
	if got.State != session.Ended || got.Reason != session.ReasonShutdown || len(l.stops) != 1 || l.stops[0] != "pid:1" {
		t.Errorf("after stop: %+v, stops %v", got, l.stops)
	}
	// A session that already ended (lost) still gets its sandbox stopped.
	if _, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("c", `{"type":"session.stop","session_id":"s3","generation":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if len(l.stops) != 2 {
		t.Errorf("stops %v, want the sandbox stopped again", l.stops)
	}
}

// launcherFunc is a launcher whose Launch is a function; it records stops.
type launcherFunc struct {
	launch func(launch.Spec) (string, error)
	mu     sync.Mutex
	stops  []string
}

func (l *launcherFunc) Launch(_ context.Context, spec launch.Spec) (string, error) {
	return l.launch(spec)
}

func (l *launcherFunc) Stop(_ context.Context, ref string, _ time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stops = append(l.stops, ref)
	return nil
}

// The clock of a worker whose claim has run out by now.
func longAgo() time.Time { return time.Now().Add(-queueworker.LaunchLease - time.Minute) }

// A launch whose worker died before recording its sandbox is taken over by the
// next generation with a new code, never by the same generation (which the
// launcher would answer with the sandbox holding the old code).
func TestLaunchAfterLostClaimIsTheNextGeneration(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	provisioning(t, store, "s4")
	start := jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "s4", Generation: 1}
	died := *w
	died.Now = longAgo
	// Its context ends (a Lambda timing out) as it starts the sandbox.
	dying, die := context.WithCancel(t.Context())
	died.Launcher = &launcherFunc{launch: func(spec launch.Spec) (string, error) {
		if _, err := l.Launch(t.Context(), spec); err != nil {
			return "", err
		}
		die()
		return "", errors.New("the worker died after starting the sandbox")
	}}
	if err := died.Do(dying, start); err == nil {
		t.Fatal("the dying launch reported success")
	}
	if err := w.Do(t.Context(), start); err != nil {
		t.Fatal(err)
	}
	if len(l.launches) != 2 {
		t.Fatalf("launches %+v, want the lost one and its replacement", l.launches)
	}
	lost, next := l.launches[0], l.launches[1]
	if lost.Generation != 1 || next.Generation != 2 || next.BootstrapCode == lost.BootstrapCode {
		t.Errorf("replacement launch %+v after %+v: want generation 2 with a new code", next, lost)
	}
	got, err := store.Get(t.Context(), "s4")
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 2 || got.SandboxRef != "pid:1" || got.BootstrapCodeHash != token.Hash(next.BootstrapCode) {
		t.Errorf("session after the replacement: %+v; want generation 2 holding the hash of the replacement's code", got)
	}
	// The start message names generation 1: it still asks for nothing more.
	if err := w.Do(t.Context(), start); err != nil || len(l.launches) != 2 {
		t.Errorf("start redelivered: %v, %d launches", err, len(l.launches))
	}
}

// A worker whose claim was replaced while it launched stops the sandbox it
// started: nobody else knows it.
func TestLaunchOfAReplacedClaimIsStopped(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	provisioning(t, store, "s5")
	start := jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "s5", Generation: 1}
	slow := *w
	slow.Now = longAgo
	replaced := make(chan error, 1)
	sl := &launcherFunc{launch: func(launch.Spec) (string, error) {
		// While the slow worker's launch is under way, its lease runs out and
		// the message comes back.
		replaced <- w.Do(t.Context(), start)
		return "pid:slow", nil
	}}
	slow.Launcher = sl
	if err := slow.Do(t.Context(), start); err != nil {
		t.Fatal(err)
	}
	if err := <-replaced; err != nil {
		t.Fatal(err)
	}
	if len(sl.stops) != 1 || sl.stops[0] != "pid:slow" {
		t.Errorf("slow worker's stops %v, want its own sandbox stopped", sl.stops)
	}
	got, _ := store.Get(t.Context(), "s5")
	if got.Generation != 2 || got.SandboxRef != "pid:1" || len(l.launches) != 1 || got.BootstrapCodeHash != token.Hash(l.launches[0].BootstrapCode) {
		t.Errorf("session %+v, launches %+v: want the replacement's sandbox and code", got, l.launches)
	}
}

// TestLaunchCarriesTheTypesSize: a session's agent type's resource limits
// (stored on it at create) are the size its sandbox is launched with; a
// session without a type gets the launcher's default size.
func TestLaunchCarriesTheTypesSize(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	now := time.Now().UTC()
	typed := session.Session{ID: "typed", State: session.Provisioning, Generation: 1, Blueprint: session.Blueprint{
		TmuxSessionName: "ra-x",
		AgentType:       "big",
		Workspace:       &registry.WorkspaceConfig{Enabled: true, ResourceLimits: registry.ResourceLimits{CPU: "2", Memory: "8G", Disk: "50G"}},
	},
		CreatedAt: now, UpdatedAt: now,
	}
	if err := store.Create(t.Context(), typed, nil); err != nil {
		t.Fatal(err)
	}
	provisioning(t, store, "plain")
	for _, id := range []string{"typed", "plain"} {
		if _, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record(id, `{"type":"session.start","session_id":"`+id+`","generation":1}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.launches) != 2 || l.launches[0].Size != (tasksize.Size{CPUUnits: 2048, MemoryMiB: 8192, DiskGiB: 50}) || l.launches[1].Size != (tasksize.Size{}) {
		t.Errorf("launches %+v", l.launches)
	}
}

// A launch that fails is retried once on the fallback capacity, in the same
// generation with the same code; when that launch works the session has its
// sandbox.
func TestFailedLaunchIsRetriedOnTheFallback(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	provisioning(t, store, "s7")
	var specs []launch.Spec
	w.Launcher = &launcherFunc{launch: func(spec launch.Spec) (string, error) {
		specs = append(specs, spec)
		if !spec.Fallback {
			return "", errors.New("RESOURCE:FARGATE_SPOT capacity unavailable")
		}
		return l.Launch(t.Context(), spec)
	}}
	if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "s7", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[1].Generation != specs[0].Generation || specs[1].BootstrapCode != specs[0].BootstrapCode || !specs[1].Fallback {
		t.Fatalf("launches %+v, want the failed one and its fallback", specs)
	}
	sess, err := store.Get(t.Context(), "s7")
	if err != nil || sess.SandboxRef == "" || sess.State != session.Provisioning {
		t.Errorf("session after the fallback launch: %+v %v", sess, err)
	}
}

// When the fallback fails too, the session fails (launch_failed), and the
// message is done: nothing launches a third time.
func TestSecondFailedLaunchFailsTheSession(t *testing.T) {
	t.Parallel()
	w, store, _, _ := setup(t)
	provisioning(t, store, "s8")
	launches := 0
	w.Launcher = &launcherFunc{launch: func(launch.Spec) (string, error) {
		launches++
		return "", errors.New("no capacity")
	}}
	start := jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "s8", Generation: 1}
	if err := w.Do(t.Context(), start); err != nil {
		t.Fatalf("a launch that failed twice is retried by the queue: %v", err)
	}
	if err := w.Do(t.Context(), start); err != nil || launches != 2 {
		t.Fatalf("redelivery: %v, %d launches, want 2", err, launches)
	}
	sess, err := store.Get(t.Context(), "s8")
	if err != nil || sess.State != session.Failed || sess.Reason != session.ReasonLaunchFailed {
		t.Errorf("session: %s %s %v", sess.State, sess.Reason, err)
	}
}

// TestWorkspaceLaunchesFailedStartTheAgentWithoutIt: a session whose
// sandbox cannot be launched with its workspace (its size, its base image),
// on either capacity, is launched once more without it: the platform's
// image at the default size, a request of its own. It records why first,
// so its sandbox is served no workspace and its status is degraded.
func TestWorkspaceLaunchesFailedStartTheAgentWithoutIt(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	now := time.Now().UTC()
	typed := session.Session{ID: "s9", State: session.Provisioning, Generation: 1, Blueprint: session.Blueprint{
		TmuxSessionName: "ra-x", AgentType: "node",
		Workspace: &registry.WorkspaceConfig{Enabled: true, BaseImage: "example.com/no/such:image", ResourceLimits: registry.ResourceLimits{CPU: "16", Memory: "120G"}},
	}, CreatedAt: now, UpdatedAt: now}
	if err := store.Create(t.Context(), typed, nil); err != nil {
		t.Fatal(err)
	}
	var specs []launch.Spec
	w.Launcher = &launcherFunc{launch: func(spec launch.Spec) (string, error) {
		specs = append(specs, spec)
		if spec.Image != "" {
			dropped, err := store.Get(t.Context(), "s9")
			if err != nil || dropped.WorkspaceDropped != "" {
				t.Errorf("a launch with the workspace, yet the session says it was dropped: %q %v", dropped.WorkspaceDropped, err)
			}
			return "", errors.New("CannotPullContainerError: pull image manifest has been retried 5 time(s)")
		}
		dropped, err := store.Get(t.Context(), "s9")
		if err != nil || dropped.WorkspaceDropped == "" {
			t.Errorf("launched bare before the session says so: %v", err)
		}
		return l.Launch(t.Context(), spec)
	}}
	if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "s9", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || !specs[1].Fallback || !specs[2].Bare || specs[2].Image != "" || specs[2].Size != (tasksize.Size{}) ||
		specs[0].Image != "example.com/no/such:image" || specs[0].Size.CPUUnits != 16384 || specs[2].BootstrapCode != specs[0].BootstrapCode {
		t.Fatalf("launches %+v, want with the workspace twice, then bare", specs)
	}
	sess, err := store.Get(t.Context(), "s9")
	if err != nil || sess.SandboxRef == "" || sess.State != session.Provisioning || !strings.Contains(sess.WorkspaceDropped, "CannotPullContainerError") {
		t.Errorf("session after the bare launch: %+v %v", sess, err)
	}

	// Without a workspace there is nothing to drop: two launches, and the
	// session fails.
	provisioning(t, store, "s10")
	specs = nil
	w.Launcher = &launcherFunc{launch: func(spec launch.Spec) (string, error) {
		specs = append(specs, spec)
		return "", errors.New("no capacity")
	}}
	if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "s10", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if sess, _ := store.Get(t.Context(), "s10"); len(specs) != 2 || sess.State != session.Failed {
		t.Errorf("%d launches, session %s: want 2 and failed", len(specs), sess.State)
	}
}

// TestLaunchThatCannotBeIsolatedIsRefused: a sandbox whose egress policy cuts
// it off, on a launcher that cannot (launch.ErrIsolationUnavailable), is
// launched nowhere else: not on the fallback capacity, not bare. Its session
// fails, and a job's session fails its job as a policy violation saying why.
func TestLaunchThatCannotBeIsolatedIsRefused(t *testing.T) {
	t.Parallel()
	w, store, _, _ := setup(t)
	jobs := &failingJobs{failed: map[string]string{}}
	w.Jobs = jobs
	var specs []launch.Spec
	w.Launcher = &launcherFunc{launch: func(spec launch.Spec) (string, error) {
		specs = append(specs, spec)
		return "", fmt.Errorf("launch %s: %w: no network namespaces here", spec.SessionID, launch.ErrIsolationUnavailable)
	}}
	none := egress.None()
	now := time.Now().UTC()
	if err := store.Create(t.Context(), session.Session{ID: "offline", Blueprint: session.Blueprint{JobID: "j1", TmuxSessionName: "ra-x",
		Workspace: &registry.WorkspaceConfig{Enabled: true}}, Egress: &none, State: session.Provisioning, Generation: 1, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "offline", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || !specs[0].Isolated || !specs[0].Offline || specs[0].Env()[sandboxwire.EnvNetworkIsolated] != "1" {
		t.Errorf("launches %+v, want one, isolated and offline", specs)
	}
	if sess, err := store.Get(t.Context(), "offline"); err != nil || sess.State != session.Failed || sess.Reason != session.ReasonLaunchFailed {
		t.Errorf("session %s (%s), %v: want failed, launch_failed", sess.State, sess.Reason, err)
	}
	if got := jobs.failed["j1"]; got != "policy_violation: no network namespaces here" {
		t.Errorf("job failed %q", got)
	}
}

// sizedJobs is a JobRunner whose every job asks for size.
type sizedJobs struct{ size tasksize.Size }

func (j sizedJobs) Prepare(context.Context, string) (string, bool, error) { return "", false, nil }
func (j sizedJobs) SessionOf(context.Context, string) (string, error)     { return "", nil }
func (j sizedJobs) Crashed(context.Context, string, string) error         { return nil }
func (j sizedJobs) OutOfMemory(context.Context, string, string) error     { return nil }
func (j sizedJobs) IsolationUnavailable(context.Context, string, string) error {
	return nil
}
func (j sizedJobs) Sweep(context.Context) error                         { return nil }
func (j sizedJobs) Size(context.Context, string) (tasksize.Size, error) { return j.size, nil }

// TestJobSandboxIsSizedForItsMemory: a job's sandbox is launched at the size
// its memory constraint needs (job.Service.Size), not a type's.
func TestJobSandboxIsSizedForItsMemory(t *testing.T) {
	w, store, l, _ := setup(t)
	want := tasksize.ForMemory(3000)
	w.Jobs = sizedJobs{size: want}
	now := time.Now().UTC()
	if err := store.Create(t.Context(), session.Session{ID: "job-sess", Blueprint: session.Blueprint{JobID: "j1", TmuxSessionName: "ra-x"}, State: session.Provisioning, Generation: 1, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "job-sess", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if len(l.launches) != 1 || l.launches[0].Size != want || want.MemoryMiB != 3072 {
		t.Fatalf("launches %+v, want one of size %+v", l.launches, want)
	}
}

// gatedLauncher holds each launch until release is closed, counting those
// waiting at once.
type gatedLauncher struct {
	countingLauncher
	mu      sync.Mutex
	waiting int
	most    int
	release chan struct{}
	arrived chan struct{}
}

func (l *gatedLauncher) Launch(ctx context.Context, spec launch.Spec) (string, error) {
	l.mu.Lock()
	l.waiting++
	l.most = max(l.most, l.waiting)
	l.mu.Unlock()
	l.arrived <- struct{}{}
	<-l.release
	l.mu.Lock()
	l.waiting--
	l.mu.Unlock()
	return l.countingLauncher.Launch(ctx, spec)
}

// TestBatchHandlesSessionsAtOnce: the starts of different sessions in one
// batch launch at once (a batch of ten takes the slowest launch's time),
// while a session's own records keep their order.
func TestBatchHandlesSessionsAtOnce(t *testing.T) {
	t.Parallel()
	w, store, _, _ := setup(t)
	l := &gatedLauncher{release: make(chan struct{}), arrived: make(chan struct{}, 10)}
	w.Launcher = l
	var recs []events.SQSMessage
	for i := range 5 {
		id := fmt.Sprintf("batch-%d", i)
		provisioning(t, store, id)
		recs = append(recs, record(id, `{"type":"session.start","session_id":"`+id+`","generation":1}`))
	}
	// The same session's start, then its stop: in that order.
	recs = append(recs, record("batch-0-stop", `{"type":"session.stop","session_id":"batch-0","generation":1}`))
	done := make(chan events.SQSEventResponse)
	go func() {
		res, err := w.Handle(t.Context(), events.SQSEvent{Records: recs})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for i := range 5 {
		select {
		case <-l.arrived: // every session's launch waits at once
		case <-time.After(time.Minute): // a bound, not a wait: one at a time never gets here
			close(l.release)
			t.Fatalf("%d launches waiting together, want 5: the batch's sessions are handled one after another", i)
		}
	}
	close(l.release)
	if res := <-done; len(res.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", res.BatchItemFailures)
	}
	if l.most != 5 {
		t.Errorf("%d launches at once, want 5", l.most)
	}
	if sess, err := store.Get(t.Context(), "batch-0"); err != nil || !sess.State.Terminal() || sess.SandboxRef == "" {
		t.Errorf("batch-0 after its start then its stop: %s ref %q %v, want ended after its launch", sess.State, sess.SandboxRef, err)
	}
}

// TestUnrecordedBareSandboxIsFoundBare: a sandbox launched without its
// workspace (launchBare) whose worker died before recording it is looked
// up as it was launched, bare, not with the workspace's image and size.
func TestUnrecordedBareSandboxIsFoundBare(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	now := time.Now().UTC()
	s := session.Session{ID: "s11", State: session.Ready, Generation: 1, Blueprint: session.Blueprint{TmuxSessionName: "ra-x",
		Workspace: &registry.WorkspaceConfig{Enabled: true, BaseImage: "example.com/img:1", ResourceLimits: registry.ResourceLimits{CPU: "2", Memory: "8G"}}},
		WorkspaceDropped: "the sandbox could not be launched with its workspace", CreatedAt: now, UpdatedAt: now, ReadyAt: now}
	s.LaunchLease = now.Add(time.Minute)
	if err := store.Create(t.Context(), s, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.SessionStart, SessionID: "s11", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if len(l.launches) != 1 || !l.launches[0].Bare || l.launches[0].Image != "" || l.launches[0].Size != (tasksize.Size{}) {
		t.Fatalf("launches %+v, want the bare one looked up", l.launches)
	}
	if got, err := store.Get(t.Context(), "s11"); err != nil || got.SandboxRef == "" {
		t.Errorf("session %+v %v: want its sandbox recorded", got, err)
	}
}

// refusingTouch is a session store whose records of sandboxes are refused
// the first n times, as an overloaded table refuses writes.
type refusingTouch struct {
	*dynamo.Sessions
	mu sync.Mutex
	n  int
}

func (r *refusingTouch) Touch(ctx context.Context, id string, gen int, set session.Fields) (session.Session, error) {
	r.mu.Lock()
	refuse := set.SandboxRef != "" && r.n > 0
	if refuse {
		r.n--
	}
	r.mu.Unlock()
	if refuse {
		return session.Session{}, errors.New("InternalServerError: the request timed out waiting for a lock")
	}
	return r.Sessions.Touch(ctx, id, gen, set)
}

// TestARefusedRecordIsRetried: a sandbox launched is recorded even when the
// table refuses the first tries; failing the message would leave the agent
// on a sandbox no kill can find until the queue gives the message back.
func TestARefusedRecordIsRetried(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	provisioning(t, store, "s1")
	refusing := &refusingTouch{Sessions: store, n: queueworker.RecordRetry.Attempts - 1}
	w.Store = refusing
	res, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("m1", `{"type":"session.start","session_id":"s1","generation":1}`)}})
	if err != nil || len(res.BatchItemFailures) != 0 {
		t.Fatalf("handle: %+v %v", res, err)
	}
	got, err := store.Get(t.Context(), "s1")
	if err != nil || got.SandboxRef != "pid:1" || len(l.launches) != 1 || refusing.n != 0 {
		t.Errorf("session %+v %v after %d launches, %d refusals left; want pid:1 recorded after one launch", got, err, len(l.launches), refusing.n)
	}
}

// published records the messages a worker sends.
type published struct {
	mu   sync.Mutex
	msgs []jobqueue.Message
	dels []time.Duration
}

func (p *published) Publish(_ context.Context, m jobqueue.Message, delay time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs, p.dels = append(p.msgs, m), append(p.dels, delay)
	return nil
}

// TestSandboxesExpireAtTheirEnd: session.expire ends a sandbox of the
// sandbox API whose end came (its sandbox stopped at once), pauses one made
// to pause, sends itself on while the end is further off, and leaves one
// whose end moved since.
func TestSandboxesExpireAtTheirEnd(t *testing.T) {
	t.Parallel()
	w, store, l, _ := setup(t)
	pub := &published{}
	w.Expiries = pub
	w.Checkpoints = noCheckpoints{}
	now := time.Now().UTC().Truncate(time.Millisecond)
	w.Now = func() time.Time { return now }
	sandbox := func(id string, ends time.Time, autoPause bool) {
		t.Helper()
		s := session.Session{ID: id, State: session.Ready, Generation: 1, Tenant: "t", CreatedAt: now, UpdatedAt: now,
			Blueprint: session.Blueprint{TmuxSessionName: "ra-x", Sandbox: &session.SandboxOptions{Template: "base", AutoPause: autoPause}},
			Launch:    session.Launch{SandboxRef: "pid:" + id}, EndsAt: ends}
		if err := store.Create(t.Context(), s, nil); err != nil {
			t.Fatal(err)
		}
	}
	expire := func(id string, at time.Time) {
		t.Helper()
		if err := w.Do(t.Context(), jobqueue.Message{Type: jobqueue.SessionExpire, SessionID: id, Generation: 1, At: at.UnixMilli()}); err != nil {
			t.Fatalf("expire %s: %v", id, err)
		}
	}
	sandbox("due", now.Add(-time.Second), false)
	expire("due", now.Add(-time.Second))
	if got, _ := store.Get(t.Context(), "due"); got.State != session.Ended || got.Reason != session.ReasonTimeout || !slices.Contains(l.stops, "pid:due") {
		t.Errorf("a sandbox at its end: %s (%s), stops %v", got.State, got.Reason, l.stops)
	}
	sandbox("pauses", now, true)
	expire("pauses", now)
	if got, _ := store.Get(t.Context(), "pauses"); got.State != session.Pausing || got.Reason != session.ReasonTimeout {
		t.Errorf("an auto-pausing sandbox at its end: %s (%s)", got.State, got.Reason)
	}
	later := now.Add(time.Hour)
	sandbox("later", later, false)
	expire("later", later)
	if got, _ := store.Get(t.Context(), "later"); got.State != session.Ready || len(pub.msgs) != 1 || pub.msgs[0].At != later.UnixMilli() || pub.dels[0] != jobqueue.MaxDelay {
		t.Errorf("an end an hour off: %s, sent on %+v after %v", got.State, pub.msgs, pub.dels)
	}
	sandbox("moved", later, false)
	expire("moved", now.Add(-time.Second))
	if got, _ := store.Get(t.Context(), "moved"); got.State != session.Ready || len(pub.msgs) != 1 {
		t.Errorf("an end that moved: %s, sent %+v", got.State, pub.msgs)
	}
}

// noCheckpoints keeps checkpoints and deletes none.
type noCheckpoints struct{}

func (noCheckpoints) Delete(context.Context, string) error { return nil }
