package queuepub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobevents/queuepub"
	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func events(n int) []jobevents.Event {
	at := time.Date(2026, 11, 26, 12, 0, 0, 123456789, time.UTC)
	types := []jobevents.DetailType{jobevents.Created, jobevents.Started, jobevents.OutputGenerated, jobevents.Completed}
	out := make([]jobevents.Event, n)
	for i := range out {
		job := fmt.Sprintf("8c9f1d2e-0000-4000-8000-%012d", i/len(types))
		typ := types[i%len(types)]
		e := jobevents.Event{
			ID: job + ":" + strings.ToLower(string(typ)), Type: typ, Time: at.Add(time.Duration(i) * time.Second),
			Detail: jobevents.Detail{
				JobID: job, CommandID: "c-1", AgentID: "a-1", IdentityID: "i-1", ContextID: "x-1",
				Status: "running", Timestamp: at.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano),
			},
		}
		if typ == jobevents.Completed {
			tokens, outputs, ms := int64(1234), 2, int64(5000)
			e.Detail.Status = "completed"
			e.Detail.Metadata = &jobevents.Metadata{TokensUsed: &tokens, Outputs: &outputs, Duration: &ms}
		}
		out[i] = e
	}
	return out
}

// orchestratorQueue bootstraps a fresh environment on the local SQS (goaws
// under the emulators) and returns its orchestrator queue.
func orchestratorQueue(t *testing.T) *sqsqueue.Queue {
	t.Helper()
	set, report := awstest.Resources(t)
	url := report.QueueURLs[set.OrchestratorQueue.Name]
	if url == "" {
		t.Fatalf("no queue %s", set.OrchestratorQueue.Name)
	}
	return sqsqueue.New(awsconfig.NewSQS(awstest.Config(t)), url)
}

// drain receives until want messages arrived, or a receive comes back empty
// after them all (long polls: the queue answers as soon as it has one).
func drain(t *testing.T, q queue.Queue, want int) []queue.Message {
	t.Helper()
	var got []queue.Message
	for empty := 0; len(got) < want && empty < 5; {
		msgs, err := q.Receive(t.Context(), queue.MaxReceive, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			empty++
		}
		for _, m := range msgs {
			got = append(got, m)
			if err := q.Delete(t.Context(), m.ReceiptHandle); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}

// The orchestrator queue receives exactly EventBridge's envelope, one
// message per event, each detail what was published.
func TestPublishPutsTheEventBridgeEnvelopeOnTheQueue(t *testing.T) {
	t.Parallel()
	q := orchestratorQueue(t)
	pub := queuepub.New(q, queuepub.LocalAccount, "us-east-1")
	evs := events(12) // more than one batch
	if err := pub.Publish(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	msgs := drain(t, q, len(evs))
	if len(msgs) != len(evs) {
		t.Fatalf("%d messages, want %d", len(msgs), len(evs))
	}
	byID := map[string]jobevents.Event{}
	for _, e := range evs {
		byID[e.ID] = e
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		dec := json.NewDecoder(strings.NewReader(m.Body))
		dec.DisallowUnknownFields()
		var env jobevents.Envelope
		if err := dec.Decode(&env); err != nil {
			t.Fatalf("body %s: %v", m.Body, err)
		}
		id, ok := env.EventID()
		e, known := byID[id]
		if !ok || !known || seen[id] {
			t.Fatalf("envelope %s: event id %q (known %v, seen %v)", m.Body, id, known, seen[id])
		}
		seen[id] = true
		if env.Version != "0" || env.Source != jobevents.Source || env.DetailType != e.Type || env.Account != queuepub.LocalAccount || env.Region != "us-east-1" {
			t.Errorf("envelope %s", m.Body)
		}
		if want := e.Time.UTC().Truncate(time.Second).Format(time.RFC3339); env.Time != want {
			t.Errorf("time %q, want %q", env.Time, want)
		}
		if !reflect.DeepEqual(env.Resources, []string{"ra:job/" + e.Detail.JobID + "/event/" + e.ID}) {
			t.Errorf("resources %v", env.Resources)
		}
		if len(env.ID) != 36 || env.ID[14] != '5' {
			t.Errorf("id %q is not a version 5 UUID", env.ID)
		}
		var d jobevents.Detail
		if err := json.Unmarshal(env.Detail, &d); err != nil || !reflect.DeepEqual(d, e.Detail) {
			t.Errorf("detail %s (%v), want %+v", env.Detail, err, e.Detail)
		}
		// EventBridge's field order, so the bytes are the same as its own.
		keys := []string{`{"version":`, `,"id":`, `,"detail-type":`, `,"source":`, `,"account":`, `,"time":`, `,"region":`, `,"resources":`, `,"detail":{"jobId":`}
		at := 0
		for _, k := range keys {
			i := strings.Index(m.Body[at:], k)
			if i < 0 {
				t.Fatalf("body %s: %s missing or out of order", m.Body, k)
			}
			at += i + len(k)
		}
	}
}

// A publish retried (a crash between the send and the outbox's delete)
// carries the same envelope, id included, so the copy is recognised.
func TestPublishAgainSendsTheSameBytes(t *testing.T) {
	t.Parallel()
	q := orchestratorQueue(t)
	pub := queuepub.New(q, queuepub.LocalAccount, "eu-west-1")
	ev := events(1)[0]
	for range 2 {
		if err := pub.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	msgs := drain(t, q, 2)
	if len(msgs) != 2 || msgs[0].Body != msgs[1].Body {
		t.Fatalf("messages %v, want the same body twice", msgs)
	}
	want, err := queuepub.Envelope(ev, queuepub.LocalAccount, "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(want)
	if !bytes.Equal(b, []byte(msgs[0].Body)) {
		t.Errorf("body %s, want %s", msgs[0].Body, b)
	}
}

// flaky fails the first sends of chosen entries, then passes to the queue.
type flaky struct {
	queue.Queue
	fails map[string]int // event body marker to failures left
	sent  [][]string
}

func (f *flaky) SendBatch(ctx context.Context, entries []queue.Entry) ([]queue.Failure, error) {
	var pass []queue.Entry
	var out []queue.Failure
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID)
		hit := false
		for marker, left := range f.fails {
			if left > 0 && strings.Contains(e.Body, marker) {
				f.fails[marker]--
				out = append(out, queue.Failure{ID: e.ID, Code: "InternalError", Message: "injected"})
				hit = true
			}
		}
		if !hit {
			pass = append(pass, e)
		}
	}
	f.sent = append(f.sent, ids)
	more, err := f.Queue.SendBatch(ctx, pass)
	return append(out, more...), err
}

// Messages the queue did not take are sent again, alone, and each arrives once.
func TestPublishRetriesOnlyTheFailedMessages(t *testing.T) {
	t.Parallel()
	evs := events(4)
	q := &flaky{Queue: orchestratorQueue(t), fails: map[string]int{evs[1].ID: 1, evs[3].ID: 2}}
	var waits []time.Duration
	pub := queuepub.New(q, queuepub.LocalAccount, "us-east-1",
		queuepub.WithRetry(3, time.Millisecond, time.Millisecond),
		queuepub.WithNotify(func(d time.Duration) { waits = append(waits, d) }))
	if err := pub.Publish(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q.sent, [][]string{{"0", "1", "2", "3"}, {"1", "3"}, {"3"}}) || len(waits) != 2 {
		t.Errorf("sends %v, waits %v", q.sent, waits)
	}
	got := map[string]int{}
	for _, m := range drain(t, q, len(evs)) {
		var env jobevents.Envelope
		_ = json.Unmarshal([]byte(m.Body), &env)
		id, _ := env.EventID()
		got[id]++
	}
	for _, e := range evs {
		if got[e.ID] != 1 {
			t.Errorf("%s arrived %d times", e.ID, got[e.ID])
		}
	}

	// Still failing after the tries: an error naming the event.
	q.fails = map[string]int{evs[0].ID: 5}
	err := pub.Publish(t.Context(), evs[0])
	if err == nil || !strings.Contains(err.Error(), evs[0].ID) {
		t.Errorf("error %v, want one naming %s", err, evs[0].ID)
	}
}

func TestEnvelopeRefusesAnIncompleteEvent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		edit func(*jobevents.Event)
	}{
		{"no id", func(e *jobevents.Event) { e.ID = "" }},
		{"no job", func(e *jobevents.Event) { e.Detail.JobID = "" }},
		{"no type", func(e *jobevents.Event) { e.Type = "" }},
		{"no time", func(e *jobevents.Event) { e.Time = time.Time{} }},
	} {
		e := events(1)[0]
		tt.edit(&e)
		if _, err := queuepub.Envelope(e, queuepub.LocalAccount, "us-east-1"); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}
