package jobworker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/jobworker"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// countingLauncher records launches and fails those of session "broken".
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
	l.stops = append(l.stops, ref)
	return nil
}

func setup(t *testing.T) (*jobworker.Worker, *dynamo.Sessions, *countingLauncher, *sqsqueue.Queue) {
	t.Helper()
	set, report := awstest.Resources(t)
	cfg := awstest.Config(t)
	store := dynamo.NewSessions(awsconfig.NewDynamoDB(cfg), set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	dlq := sqsqueue.New(awsconfig.NewSQS(cfg), report.QueueURLs[set.JobsQueue.DeadLetterName])
	l := &countingLauncher{}
	w := &jobworker.Worker{Store: store, Launcher: l, DLQ: dlq, GatewayURL: "http://gw", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return w, store, l, dlq
}

func provisioning(t *testing.T, store *dynamo.Sessions, id string) {
	t.Helper()
	now := time.Now().UTC()
	if err := store.Create(t.Context(), session.Session{ID: id, State: session.Provisioning, Generation: 1, TmuxSessionName: "ra-x", CreatedAt: now, UpdatedAt: now}, nil); err != nil {
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
	res, err := w.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{
		record("m1", `{"type":"session.start","session_id":"good","generation":1}`),
		record("m2", `not json at all`),
		record("m3", `{"type":"session.start","session_id":"broken","generation":1}`),
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
	if err != nil || got.SandboxRef != "pid:1" || len(got.SandboxTokenHash) != 64 {
		t.Errorf("launched session %+v, %v", got, err)
	}
	if len(l.launches) != 1 || l.launches[0].GatewayURL != "http://gw" || l.launches[0].SandboxToken == "" {
		t.Errorf("launches %+v", l.launches)
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
	if got.State != session.Ended || got.Reason != session.ReasonCrashed || got.ExpiresAt == 0 {
		t.Errorf("after task stopped: %+v", got)
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
