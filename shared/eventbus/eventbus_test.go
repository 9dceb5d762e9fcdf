package eventbus_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/remote-agents/remote-agents/shared/eventbus"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobevents/queuepub"
)

// fakeEventBridge speaks EventBridge's JSON 1.1 wire format for PutEvents: it
// records every request's entries and answers each entry with an event id, or
// with the error code fail gives it (attempt counts the entry's requests, from 1).
type fakeEventBridge struct {
	mu       sync.Mutex
	requests [][]wireEntry
	attempts map[string]int // by the entry's resource
	fail     func(e wireEntry, attempt int) string
	status   int // if set, every request fails with this status
}

type wireEntry struct {
	EventBusName string
	Source       string
	DetailType   string
	Detail       string
	Time         float64
	Resources    []string
}

func (f *fakeEventBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct{ Entries []wireEntry }
	if r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") || json.NewDecoder(r.Body).Decode(&body) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if f.status != 0 {
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(`{"__type":"InternalException","message":"down"}`))
		return
	}
	if len(body.Entries) > eventbus.MaxBatchEntries {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"ValidationException","message":"too many entries"}`))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, body.Entries)
	type result struct {
		EventID      string `json:"EventId,omitempty"`
		ErrorCode    string `json:"ErrorCode,omitempty"`
		ErrorMessage string `json:"ErrorMessage,omitempty"`
	}
	out := struct {
		Entries          []result
		FailedEntryCount int
	}{}
	for _, e := range body.Entries {
		key := strings.Join(e.Resources, ",")
		f.attempts[key]++
		if f.fail != nil {
			if code := f.fail(e, f.attempts[key]); code != "" {
				out.Entries = append(out.Entries, result{ErrorCode: code, ErrorMessage: "injected " + code})
				out.FailedEntryCount++
				continue
			}
		}
		out.Entries = append(out.Entries, result{EventID: fmt.Sprintf("eb-%d-%d", len(f.requests), len(out.Entries))})
	}
	_ = json.NewEncoder(w).Encode(out)
}

// taken lists the entries EventBridge took, in the order it took them.
func (f *fakeEventBridge) taken(t *testing.T) []wireEntry {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wireEntry
	attempt := map[string]int{}
	for _, req := range f.requests {
		for _, e := range req {
			key := strings.Join(e.Resources, ",")
			attempt[key]++
			if f.fail == nil || f.fail(e, attempt[key]) == "" {
				out = append(out, e)
			}
		}
	}
	return out
}

// start serves fake and returns a bus over the real SDK client pointed at it,
// and the waits the bus took between tries.
func start(t *testing.T, fake *fakeEventBridge, opts ...eventbus.Option) (*eventbus.Bus, *[]time.Duration) {
	t.Helper()
	fake.attempts = map[string]int{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := eventbridge.New(eventbridge.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("k", "s", ""),
		RetryMaxAttempts: 1,
	})
	var mu sync.Mutex
	waits := &[]time.Duration{}
	opts = append([]eventbus.Option{eventbus.WithNotify(func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		*waits = append(*waits, d)
	})}, opts...)
	return eventbus.New(client, jobevents.BusName("test"), opts...), waits
}

func events(n int) []jobevents.Event {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	out := make([]jobevents.Event, n)
	for i := range out {
		job := fmt.Sprintf("8c9f1d2e-0000-4000-8000-%012d", i)
		tokens, outputs, ms := int64(100*i), i%3, int64(1500)
		out[i] = jobevents.Event{
			ID:   job + ":agent.job.completed",
			Type: jobevents.Completed,
			Time: at.Add(time.Duration(i) * time.Second),
			Detail: jobevents.Detail{
				JobID: job, CommandID: "c-" + job, AgentID: "a-1", IdentityID: "i-1", ContextID: "x-1",
				Status: "completed", Timestamp: at.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano),
				Metadata: &jobevents.Metadata{TokensUsed: &tokens, Outputs: &outputs, Duration: &ms},
			},
		}
	}
	return out
}

func TestPublishPutsEachEventAsOneEntryInBatchesOfTen(t *testing.T) {
	t.Parallel()
	fake := &fakeEventBridge{}
	bus, _ := start(t, fake)
	evs := events(23)
	if err := bus.Publish(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, r := range fake.requests {
		sizes = append(sizes, len(r))
	}
	if !reflect.DeepEqual(sizes, []int{10, 10, 3}) {
		t.Errorf("requests of %v entries, want [10 10 3]", sizes)
	}
	got := fake.taken(t)
	if len(got) != len(evs) {
		t.Fatalf("%d entries taken, want %d", len(got), len(evs))
	}
	for i, e := range evs {
		g := got[i]
		if g.EventBusName != "ra-test-jobs" || g.Source != jobevents.Source || g.DetailType != string(e.Type) {
			t.Errorf("entry %d: bus %q source %q type %q", i, g.EventBusName, g.Source, g.DetailType)
		}
		if !reflect.DeepEqual(g.Resources, []string{"ra:job/" + e.Detail.JobID + "/event/" + e.ID}) {
			t.Errorf("entry %d: resources %v", i, g.Resources)
		}
		if at := time.Unix(int64(g.Time), 0).UTC(); !at.Equal(e.Time) {
			t.Errorf("entry %d: time %s, want %s", i, at, e.Time)
		}
		var d jobevents.Detail
		if err := json.Unmarshal([]byte(g.Detail), &d); err != nil || !reflect.DeepEqual(d, e.Detail) {
			t.Errorf("entry %d: detail %s (%v), want %+v", i, g.Detail, err, e.Detail)
		}
		// The spec's payload and nothing else.
		var fields map[string]any
		_ = json.Unmarshal([]byte(g.Detail), &fields)
		for k := range fields {
			if !strings.Contains(" jobId commandId agentId identityId contextId status timestamp metadata ", " "+k+" ") {
				t.Errorf("entry %d: detail field %q is not the spec's", i, k)
			}
		}
	}
}

func TestPublishSplitsRequestsAtTheSizeLimit(t *testing.T) {
	t.Parallel()
	fake := &fakeEventBridge{}
	bus, _ := start(t, fake)
	evs := events(5)
	for i := range evs {
		evs[i].Detail.CommandID = strings.Repeat("c", 100*1024) // ~100 KB each: two per request
	}
	if err := bus.Publish(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, r := range fake.requests {
		sizes = append(sizes, len(r))
		total := 0
		for _, e := range r {
			total += 14 + len(e.Source) + len(e.DetailType) + len(e.Detail) + len(strings.Join(e.Resources, ""))
		}
		if total > eventbus.MaxBatchBytes {
			t.Errorf("request of %d bytes", total)
		}
	}
	if !reflect.DeepEqual(sizes, []int{2, 2, 1}) {
		t.Errorf("requests of %v entries, want [2 2 1]", sizes)
	}
	if len(fake.taken(t)) != 5 {
		t.Errorf("%d taken", len(fake.taken(t)))
	}
}

func TestPublishRetriesOnlyTheFailedEntries(t *testing.T) {
	t.Parallel()
	evs := events(6)
	flaky := map[string]int{jobevents.Resource(evs[1]): 1, jobevents.Resource(evs[4]): 2} // fails this many times
	fake := &fakeEventBridge{fail: func(e wireEntry, attempt int) string {
		if attempt <= flaky[e.Resources[0]] {
			return []string{"InternalFailure", "ThrottlingException"}[attempt-1]
		}
		return ""
	}}
	bus, waits := start(t, fake, eventbus.WithRetry(4, 10*time.Millisecond, 15*time.Millisecond))
	if err := bus.Publish(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, r := range fake.requests {
		sizes = append(sizes, len(r))
	}
	if !reflect.DeepEqual(sizes, []int{6, 2, 1}) {
		t.Errorf("requests of %v entries, want [6 2 1] (the failed entries alone)", sizes)
	}
	if r := fake.requests[2]; r[0].Resources[0] != jobevents.Resource(evs[4]) {
		t.Errorf("third request resent %v", r[0].Resources)
	}
	taken := map[string]int{}
	for _, e := range fake.taken(t) {
		taken[e.Resources[0]]++
	}
	for _, e := range evs {
		if taken[jobevents.Resource(e)] != 1 {
			t.Errorf("%s taken %d times", e.ID, taken[jobevents.Resource(e)])
		}
	}
	if len(*waits) != 2 || (*waits)[0] > 10*time.Millisecond || (*waits)[1] > 15*time.Millisecond {
		t.Errorf("waits %v, want 2 within 10ms then 15ms (capped)", *waits)
	}
}

func TestPublishGivesUpAfterItsTries(t *testing.T) {
	t.Parallel()
	evs := events(3)
	fake := &fakeEventBridge{fail: func(e wireEntry, _ int) string {
		if e.Resources[0] == jobevents.Resource(evs[2]) {
			return "ThrottlingException"
		}
		return ""
	}}
	bus, waits := start(t, fake, eventbus.WithRetry(3, time.Millisecond, time.Millisecond))
	err := bus.Publish(t.Context(), evs...)
	var pe *eventbus.PublishError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].EventID != evs[2].ID || pe.Failed[0].Code != "ThrottlingException" {
		t.Fatalf("error %v, want a PublishError naming %s", err, evs[2].ID)
	}
	if !strings.Contains(err.Error(), evs[2].ID) || !strings.Contains(err.Error(), "ra-test-jobs") {
		t.Errorf("error %q names neither the event nor the bus", err)
	}
	if len(fake.requests) != 3 || len(*waits) != 2 {
		t.Errorf("%d requests, %d waits; want 3 tries", len(fake.requests), len(*waits))
	}
}

func TestPublishDoesNotRetryWhatWouldFailAgain(t *testing.T) {
	t.Parallel()
	evs := events(3)
	fake := &fakeEventBridge{fail: func(e wireEntry, _ int) string {
		switch e.Resources[0] {
		case jobevents.Resource(evs[0]):
			return "MalformedDetail"
		case jobevents.Resource(evs[1]):
			return "InternalFailure"
		}
		return ""
	}}
	bus, _ := start(t, fake, eventbus.WithRetry(2, time.Millisecond, time.Millisecond))
	err := bus.Publish(t.Context(), evs...)
	var pe *eventbus.PublishError
	if !errors.As(err, &pe) || len(pe.Failed) != 2 {
		t.Fatalf("error %v, want both failures", err)
	}
	var sizes []int
	for _, r := range fake.requests {
		sizes = append(sizes, len(r))
	}
	if !reflect.DeepEqual(sizes, []int{3, 1}) || fake.requests[1][0].Resources[0] != jobevents.Resource(evs[1]) {
		t.Errorf("requests of %v entries, want [3 1] resending only the retryable one", sizes)
	}
}

func TestPublishRefusesWhatCannotBeAnEntry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		event func(e *jobevents.Event)
	}{
		{"no id", func(e *jobevents.Event) { e.ID = "" }},
		{"no job id", func(e *jobevents.Event) { e.Detail.JobID = "" }},
		{"no type", func(e *jobevents.Event) { e.Type = "" }},
		{"no time", func(e *jobevents.Event) { e.Time = time.Time{} }},
		{"over 256 KB", func(e *jobevents.Event) { e.Detail.CommandID = strings.Repeat("c", eventbus.MaxBatchBytes) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeEventBridge{}
			bus, _ := start(t, fake)
			evs := events(2)
			tt.event(&evs[1])
			if err := bus.Publish(t.Context(), evs...); err == nil {
				t.Fatal("published")
			}
			if len(fake.requests) != 0 {
				t.Errorf("%d requests sent", len(fake.requests))
			}
		})
	}
}

func TestPublishReportsAFailedRequest(t *testing.T) {
	t.Parallel()
	fake := &fakeEventBridge{status: http.StatusInternalServerError}
	bus, _ := start(t, fake)
	err := bus.Publish(t.Context(), events(2)...)
	if err == nil || !strings.Contains(err.Error(), "ra-test-jobs") {
		t.Fatalf("error %v", err)
	}
}

// What EventBridge delivers for an entry the bus sent (its envelope, built as
// EventBridge builds it from the entry) is what the bundled emulators'
// publisher puts on the queue, but for the id EventBridge picks: the
// orchestrator reads the same fields everywhere.
func TestEntriesBecomeTheQueuePublishersEnvelope(t *testing.T) {
	t.Parallel()
	fake := &fakeEventBridge{}
	bus, _ := start(t, fake)
	evs := events(3)
	evs[1].Time = evs[1].Time.Add(750 * time.Millisecond) // EventBridge keeps whole seconds
	if err := bus.Publish(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	for i, g := range fake.taken(t) {
		delivered := jobevents.Envelope{
			Version: "0", ID: "eventbridge's own", DetailType: jobevents.DetailType(g.DetailType), Source: g.Source,
			Account: queuepub.LocalAccount, Time: time.Unix(int64(g.Time), 0).UTC().Format("2006-01-02T15:04:05Z"),
			Region: "us-east-1", Resources: g.Resources, Detail: json.RawMessage(g.Detail),
		}
		want, err := queuepub.Envelope(evs[i], queuepub.LocalAccount, "us-east-1")
		if err != nil {
			t.Fatal(err)
		}
		want.ID = delivered.ID
		if !reflect.DeepEqual(delivered, want) {
			t.Errorf("event %d: EventBridge delivers %+v, the queue publisher sends %+v", i, delivered, want)
		}
	}
}
