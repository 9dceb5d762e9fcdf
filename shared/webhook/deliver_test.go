package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
	"github.com/remote-agents/remote-agents/shared/webhook"
	"github.com/remote-agents/remote-agents/shared/webhook/webhooktest"
)

// clock is a test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// memQueue records what is sent to it.
type memQueue struct {
	mu   sync.Mutex
	sent []sent
}

type sent struct {
	body  string
	delay time.Duration
}

func (q *memQueue) Send(_ context.Context, body string, delay time.Duration) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, sent{body, delay})
	return strconv.Itoa(len(q.sent)), nil
}

func (q *memQueue) SendBatch(ctx context.Context, es []queue.Entry) ([]queue.Failure, error) {
	for _, e := range es {
		_, _ = q.Send(ctx, e.Body, e.Delay)
	}
	return nil, nil
}

func (q *memQueue) Receive(context.Context, int, time.Duration) ([]queue.Message, error) {
	return nil, nil
}
func (q *memQueue) Delete(context.Context, string) error                          { return nil }
func (q *memQueue) ChangeVisibility(context.Context, string, time.Duration) error { return nil }

// take returns and forgets what was sent.
func (q *memQueue) take() []sent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.sent
	q.sent = nil
	return out
}

// receiver is an endpoint that verifies every delivery with the Standard
// Webhooks library, with each secret it is given.
type receiver struct {
	t       *testing.T
	clock   *clock
	mu      sync.Mutex
	secrets []string
	status  int // what it answers; 0: 204
	got     []received
	srv     *httptest.Server
}

type received struct {
	ID, Type string
	Seq      int64
	Sigs     int
	Data     map[string]any
}

func newReceiver(t *testing.T, c *clock) *receiver {
	r := &receiver{t: t, clock: c}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status != 0 {
		w.WriteHeader(r.status)
		return
	}
	for _, s := range r.secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			r.t.Errorf("secret %q: %v", s, err)
			continue
		}
		// The test clock is not the library's: check the signature, then
		// the timestamp against the test clock.
		if err := wh.VerifyIgnoringTimestamp(body, req.Header); err != nil {
			r.t.Errorf("delivery %s does not verify with %s…: %v", req.Header.Get("webhook-id"), s[:10], err)
		}
	}
	if ts := req.Header.Get("webhook-timestamp"); ts != strconv.FormatInt(r.clock.Now().Unix(), 10) {
		r.t.Errorf("webhook-timestamp %s, want %d", ts, r.clock.Now().Unix())
	}
	var msg struct {
		Type      string         `json:"type"`
		Timestamp time.Time      `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Timestamp.IsZero() {
		r.t.Errorf("body %s: %v", body, err)
	}
	seq, _ := msg.Data["sequence"].(float64)
	r.got = append(r.got, received{ID: req.Header.Get("webhook-id"), Type: msg.Type, Seq: int64(seq),
		Sigs: len(strings.Fields(req.Header.Get("webhook-signature"))), Data: msg.Data})
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) set(status int) { r.mu.Lock(); defer r.mu.Unlock(); r.status = status }

func (r *receiver) trust(secrets ...string) { r.mu.Lock(); defer r.mu.Unlock(); r.secrets = secrets }

func (r *receiver) take() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

// world is one app with an agent, an endpoint and a deliverer.
type world struct {
	clock    *clock
	sessions *storetest.Memory
	store    *webhooktest.Memory
	queue    *memQueue
	dlq      *memQueue
	d        *webhook.Deliverer
	svc      *webhook.Service
	app      registry.AppKey
	recv     *receiver
}

func newWorld(t *testing.T) *world {
	t.Helper()
	c := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	w := &world{clock: c, sessions: storetest.NewMemory(), store: webhooktest.NewMemory(), queue: &memQueue{}, dlq: &memQueue{},
		app: registry.AppKey{ID: "key-1", Tenant: "tenant-1"}}
	w.sessions.Now = c.Now
	addrs := webhook.Addresses{Loopback: true}
	w.d = &webhook.Deliverer{Store: w.store, Streams: w.sessions, Queue: w.queue, DLQ: w.dlq, Client: addrs.Client(),
		Log: slog.New(slog.DiscardHandler), Now: c.Now}
	w.svc = &webhook.Service{Store: w.store, Addresses: addrs, Queue: w.queue, Agents: w.sessions, Now: c.Now}
	w.recv = newReceiver(t, c)
	return w
}

// endpoint registers the receiver for events.
func (w *world) endpoint(t *testing.T, events ...string) webhook.View {
	t.Helper()
	url := w.recv.srv.URL + "/hooks"
	v, err := w.svc.Create(t.Context(), w.app, webhook.Request{URL: &url, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.Secret, "whsec_") || !strings.HasPrefix(v.ID, "wh_") {
		t.Fatalf("create answered %+v", v)
	}
	w.recv.trust(v.Secret)
	return v
}

// agent creates an agent of the app and takes it through a short life:
// created, ready, a message, working, ended.
func (w *world) agent(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	id := fmt.Sprintf("agent-%d", time.Now().UnixNano())
	now := w.clock.Now()
	s := session.Session{ID: id, Tenant: w.app.Tenant, AppKeyID: w.app.ID, State: session.Provisioning, Generation: 1, CreatedAt: now, UpdatedAt: now}
	if err := w.sessions.Create(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Second)
	if _, err := w.sessions.Transition(ctx, id, session.Change{From: []session.State{session.Provisioning}, To: session.Ready}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.sessions.AppendEvents(ctx, id, 1, []session.Event{
		{Type: "agent.message", Data: map[string]any{"text": strings.Repeat("é", webhook.MaxTextBytes)}},
		{Type: "tool.call", Data: map[string]any{"name": "bash"}},
		{Type: "state.changed", Data: map[string]any{"state": "working"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.sessions.Transition(ctx, id, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonShutdown}); err != nil {
		t.Fatal(err)
	}
	return id
}

func types(rs []received) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Type)
	}
	return out
}

var life = []string{"agent.created", "agent.ready", "agent.message", "agent.state_changed", "agent.ended"}

// TestDeliversAnAgentsLifeOnceInOrder: every subscribed event once, in
// order, signed (verified by the Standard Webhooks library), with ids that
// name the stream and sequence; a second trigger sends nothing again.
func TestDeliversAnAgentsLifeOnceInOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ep := w.endpoint(t, webhook.All)
	agent := w.agent(t)
	for range 2 {
		if err := w.d.Deliver(t.Context(), agent); err != nil {
			t.Fatal(err)
		}
	}
	got := w.recv.take()
	if !slices.Equal(types(got), life) {
		t.Fatalf("delivered %q, want %q", types(got), life)
	}
	for i, r := range got {
		if want := fmt.Sprintf("msg_%s_%d", agent, r.Seq); r.ID != want || r.Data["agent_id"] != agent || r.Sigs != 1 {
			t.Errorf("delivery %d: id %s, agent %v, %d signatures; want %s, %s, 1", i, r.ID, r.Data["agent_id"], r.Sigs, want, agent)
		}
	}
	if seqs := []int64{got[0].Seq, got[1].Seq, got[4].Seq}; !slices.Equal(seqs, []int64{1, 2, 6}) {
		t.Errorf("sequences %v, want 1, 2 … 6 (tool.call, 4, is not a webhook event)", seqs)
	}
	if text := got[2].Data["text"].(string); len(text) > webhook.MaxTextBytes || got[2].Data["text_truncated"] != true {
		t.Errorf("a long message's text: %d bytes, truncated %v", len(text), got[2].Data["text_truncated"])
	}
	if got[4].Data["reason"] != "shutdown" || got[4].Data["state"] != "ended" {
		t.Errorf("agent.ended data %v, want its state and reason", got[4].Data)
	}
	log, err := w.svc.Deliveries(t.Context(), w.app, ep.ID, 10, "")
	if err != nil || len(log.Deliveries) != 5 || log.Deliveries[0].Type != "agent.ended" || log.Deliveries[0].Status != webhook.StatusDelivered {
		t.Errorf("log %+v %v", log, err)
	}
	if sent := w.queue.take(); len(sent) != 0 {
		t.Errorf("queued %v, want nothing (all delivered)", sent)
	}
}

// TestEndpointsGetWhatTheySubscribeTo: only subscribed types, and live
// only what was written after the endpoint was made.
func TestEndpointsGetWhatTheySubscribeTo(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	early := w.agent(t)
	w.clock.Advance(time.Minute)
	w.endpoint(t, webhook.AgentEnded, webhook.AgentFailed)
	late := w.agent(t)
	for _, a := range []string{early, late} {
		if err := w.d.Deliver(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	got := w.recv.take()
	if len(got) != 1 || got[0].Type != "agent.ended" || got[0].Data["agent_id"] != late {
		t.Errorf("delivered %+v, want the later agent's agent.ended alone", got)
	}
}

// TestRetriesInOrderUntilTheReceiverIsBack: a receiver down for 30 s gets
// everything once it is back, in order; later events wait for the first.
func TestRetriesInOrderUntilTheReceiverIsBack(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ep := w.endpoint(t, webhook.All)
	w.recv.set(http.StatusServiceUnavailable)
	agent := w.agent(t)
	down := w.clock.Now()
	attempts := 0
	for w.clock.Now().Sub(down) < 30*time.Second {
		if err := w.d.Deliver(t.Context(), agent); err != nil {
			t.Fatal(err)
		}
		attempts++
		sent := w.queue.take()
		if len(sent) != 1 || sent[0].delay <= 0 || sent[0].delay > webhook.MaxRetryWait {
			t.Fatalf("after a failure, queued %+v; want one trigger with a delay", sent)
		}
		w.clock.Advance(sent[0].delay)
	}
	log, err := w.svc.Deliveries(t.Context(), w.app, ep.ID, 10, "")
	if err != nil || len(log.Deliveries) != 1 || log.Deliveries[0].Status != webhook.StatusRetrying ||
		log.Deliveries[0].ResponseCode != 503 || log.Deliveries[0].NextAttemptAt == nil || log.Deliveries[0].Attempts != attempts {
		t.Fatalf("log while down %+v %v; want the first event retrying after %d attempts", log, err, attempts)
	}
	w.recv.set(0)
	back := w.clock.Now()
	for range 20 {
		if err := w.d.Deliver(t.Context(), agent); err != nil {
			t.Fatal(err)
		}
		sent := w.queue.take()
		if len(sent) == 0 {
			break
		}
		w.clock.Advance(sent[0].delay)
	}
	if took := w.clock.Now().Sub(back); took > time.Minute {
		t.Errorf("delivered %s after the receiver came back, want within a minute", took)
	}
	if got := w.recv.take(); !slices.Equal(types(got), life) {
		t.Errorf("after the outage, delivered %q; want %q", types(got), life)
	}
}

// TestDeadLettersAfterADayAndGoesOn: an event refused for 24 h goes to the
// DLQ and the next is sent; a 410 disables the endpoint.
func TestDeadLettersAfterADayAndGoesOn(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ep := w.endpoint(t, webhook.All)
	w.recv.set(http.StatusInternalServerError)
	agent := w.agent(t)
	start := w.clock.Now()
	for len(w.dlq.sent) == 0 {
		if w.clock.Now().Sub(start) > webhook.RetryFor+2*webhook.MaxRetryWait {
			t.Fatal("nothing dead-lettered after a day and more")
		}
		if err := w.d.Deliver(t.Context(), agent); err != nil {
			t.Fatal(err)
		}
		if sent := w.queue.take(); len(sent) > 0 {
			w.clock.Advance(max(sent[0].delay, time.Second))
		}
	}
	if took := w.clock.Now().Sub(start); took < webhook.RetryFor {
		t.Errorf("dead-lettered after %s, want 24 h of retries", took)
	}
	var dead map[string]any
	if err := json.Unmarshal([]byte(w.dlq.sent[0].body), &dead); err != nil || dead["webhook_id"] != fmt.Sprintf("msg_%s_1", agent) {
		t.Errorf("dead letter %s: %v", w.dlq.sent[0].body, err)
	}
	w.recv.set(http.StatusGone)
	w.clock.Advance(webhook.MaxRetryWait)
	if err := w.d.Deliver(t.Context(), agent); err != nil {
		t.Fatal(err)
	}
	got, err := w.svc.Get(t.Context(), w.app, ep.ID)
	if err != nil || !got.Disabled || got.DisabledReason == "" {
		t.Errorf("after a 410: %+v %v; want disabled", got, err)
	}
	log, _ := w.svc.Deliveries(t.Context(), w.app, ep.ID, 10, "")
	statuses := []string{}
	for _, d := range log.Deliveries {
		statuses = append(statuses, d.Status)
	}
	if !slices.Equal(statuses, []string{webhook.StatusEndpointDisabled, webhook.StatusDeadLettered}) {
		t.Errorf("log statuses %q", statuses)
	}
}

// TestReplaySendsTheSameIDsAgain: a replay from sequence 1 re-sends all
// with the ids of the first delivery; since a time, those after it.
func TestReplaySendsTheSameIDsAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ep := w.endpoint(t, webhook.All)
	agent := w.agent(t)
	if err := w.d.Deliver(t.Context(), agent); err != nil {
		t.Fatal(err)
	}
	first := w.recv.take()
	one := int64(1)
	r, err := w.svc.Replay(t.Context(), w.app, ep.ID, webhook.ReplayRequest{FromSequence: &one, AgentID: agent})
	if err != nil || r.Agents != 1 {
		t.Fatalf("replay %+v %v", r, err)
	}
	for sent := w.queue.take(); len(sent) > 0; sent = w.queue.take() {
		for _, s := range sent {
			if err := w.d.Handle(t.Context(), s.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	again := w.recv.take()
	if len(again) != len(first) {
		t.Fatalf("replayed %d, first delivered %d", len(again), len(first))
	}
	for i := range first {
		if again[i].ID != first[i].ID {
			t.Errorf("replayed %d: id %s, first %s", i, again[i].ID, first[i].ID)
		}
	}
	since := w.clock.Now().Add(-time.Hour)
	if r, err := w.svc.Replay(t.Context(), w.app, ep.ID, webhook.ReplayRequest{Since: &since}); err != nil || r.Agents != 1 {
		t.Errorf("replay since: %+v %v", r, err)
	}
	bad := []webhook.ReplayRequest{{}, {FromSequence: &one}, {FromSequence: &one, AgentID: agent, Since: &since}, {FromSequence: &one, AgentID: "agent-of-another"}}
	for _, in := range bad {
		if _, err := w.svc.Replay(t.Context(), w.app, ep.ID, in); err == nil {
			t.Errorf("replay %+v accepted", in)
		}
	}
}

// TestRotatedSecretSignsBesideTheNewOne: after a rotation every delivery
// carries two signatures, each verifying with its secret, for the overlap.
func TestRotatedSecretSignsBesideTheNewOne(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ep := w.endpoint(t, webhook.All)
	rot, err := w.svc.Rotate(t.Context(), w.app, ep.ID)
	if err != nil || rot.Secret == ep.Secret || rot.PreviousSecretExpiresAt == nil {
		t.Fatalf("rotate %+v %v", rot, err)
	}
	w.recv.trust(ep.Secret, rot.Secret) // each must verify alone
	agent := w.agent(t)
	if err := w.d.Deliver(t.Context(), agent); err != nil {
		t.Fatal(err)
	}
	for _, r := range w.recv.take() {
		if r.Sigs != 2 {
			t.Errorf("%s carried %d signatures, want 2", r.ID, r.Sigs)
		}
	}
	w.clock.Advance(webhook.SecretOverlap)
	w.recv.trust(rot.Secret)
	if err := w.d.Deliver(t.Context(), w.agent(t)); err != nil {
		t.Fatal(err)
	}
	for _, r := range w.recv.take() {
		if r.Sigs != 1 {
			t.Errorf("after the overlap %s carried %d signatures, want 1", r.ID, r.Sigs)
		}
	}
}

// TestEndpointRequests: the checks of create and change.
func TestEndpointRequests(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	str := func(s string) *string { return &s }
	ok := str(w.recv.srv.URL)
	bad := []webhook.Request{
		{URL: ok},
		{Events: []string{webhook.All}},
		{URL: ok, Events: []string{}},
		{URL: ok, Events: []string{"agent.nope"}},
		{URL: str("ftp://example.com/"), Events: []string{webhook.All}},
		{URL: str("https://user:pw@example.com/"), Events: []string{webhook.All}},
		{URL: str("https://10.0.0.1/"), Events: []string{webhook.All}},
		{URL: str("https://169.254.169.254/latest"), Events: []string{webhook.All}},
		{URL: str("https://metadata.google.internal/"), Events: []string{webhook.All}},
		{URL: ok, Events: []string{webhook.All}, Description: str(strings.Repeat("x", webhook.MaxDescriptionBytes+1))},
	}
	for _, in := range bad {
		if _, err := w.svc.Create(t.Context(), w.app, in); err == nil {
			t.Errorf("create %+v accepted", in)
		}
	}
	for i := range webhook.MaxEndpoints {
		if _, err := w.svc.Create(t.Context(), w.app, webhook.Request{URL: ok, Events: []string{webhook.All, webhook.All}}); err != nil {
			t.Fatalf("endpoint %d: %v", i, err)
		}
	}
	if _, err := w.svc.Create(t.Context(), w.app, webhook.Request{URL: ok, Events: []string{webhook.All}}); err == nil {
		t.Error("an endpoint past the most accepted")
	}
	list, err := w.svc.List(t.Context(), w.app)
	if err != nil || len(list.Webhooks) != webhook.MaxEndpoints || list.Webhooks[0].Secret != "" || !slices.Equal(list.Webhooks[0].Events, []string{"*"}) {
		t.Fatalf("list %+v %v", list, err)
	}
	other := registry.AppKey{ID: "key-2", Tenant: "tenant-2"}
	id := list.Webhooks[0].ID
	if _, err := w.svc.Get(t.Context(), other, id); err == nil {
		t.Error("another app read an endpoint")
	}
	if err := w.svc.Delete(t.Context(), other, id); err == nil {
		t.Error("another app deleted an endpoint")
	}
	off := true
	if v, err := w.svc.Update(t.Context(), w.app, id, webhook.Request{Disabled: &off, Events: []string{webhook.AgentEnded}}); err != nil || !v.Disabled || !slices.Equal(v.Events, []string{"agent.ended"}) {
		t.Errorf("update %+v %v", v, err)
	}
	if err := w.svc.Delete(t.Context(), w.app, id); err != nil {
		t.Error(err)
	}
	if _, err := w.svc.Get(t.Context(), w.app, id); err == nil {
		t.Error("a deleted endpoint read")
	}
}

// TestQuotaExceededComesFromTheAppsStream: an app's own stream is
// delivered like an agent's, with ids that name the app, no agent_id.
func TestQuotaExceededComesFromTheAppsStream(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.endpoint(t, webhook.QuotaExceeded)
	for range 2 {
		if _, _, err := w.sessions.AppendAppEvent(t.Context(), w.app.Tenant, "", session.Event{Type: "quota.exceeded",
			Data: map[string]any{"quota": "concurrent_sessions", "limit": 2}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := webhook.Announce(t.Context(), w.queue, []session.Event{{SessionID: session.AppStream(w.app.Tenant), Type: "quota.exceeded"}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range w.queue.take() {
		if err := w.d.Handle(t.Context(), s.body); err != nil {
			t.Fatal(err)
		}
	}
	got := w.recv.take()
	if len(got) != 2 || got[0].ID != "msg_app_tenant-1_1" || got[1].ID != "msg_app_tenant-1_2" || got[0].Type != "quota.exceeded" {
		t.Fatalf("delivered %+v", got)
	}
	if _, ok := got[0].Data["agent_id"]; ok || got[0].Data["quota"] != "concurrent_sessions" {
		t.Errorf("data %v: want the quota, and no agent", got[0].Data)
	}
}

// TestConcurrentTriggersDeliverOnce: triggers handled at once, as a
// queue's consumers do, deliver each event once, in order.
func TestConcurrentTriggersDeliverOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.endpoint(t, webhook.All)
	agent := w.agent(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := w.d.Deliver(t.Context(), agent); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, s := range w.queue.take() { // a run that found the cursor busy tries again
		if err := w.d.Handle(t.Context(), s.body); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.recv.take(); !slices.Equal(types(got), life) {
		t.Errorf("delivered %q, want %q once each", types(got), life)
	}
}
