package systemtest_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/session"
)

// hookReceiver is an app's webhook endpoint on this machine: it verifies
// every delivery with the Standard Webhooks library (signature and
// timestamp) under each secret it trusts, and can be stopped and started
// again on the same address.
type hookReceiver struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	// secrets must each verify every delivery.
	secrets []string
	got     []hook
	srv     *http.Server
}

type hook struct {
	ID, Type string
	Seq      int64
	Agent    string
	Sigs     int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{t: t}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *hookReceiver) start() {
	addr := cmp.Or(r.addr, "127.0.0.1:0")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (r *hookReceiver) stop() {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (r *hookReceiver) url() string { return "http://" + r.addr + "/hooks" }

func (r *hookReceiver) trust(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = secrets
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		if err != nil {
			r.t.Errorf("delivery %s does not verify: %v", req.Header.Get("webhook-id"), err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	var msg struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		r.t.Errorf("body %s: %v", body, err)
	}
	seq, _ := msg.Data["sequence"].(float64)
	agent, _ := msg.Data["agent_id"].(string)
	r.got = append(r.got, hook{ID: req.Header.Get("webhook-id"), Type: msg.Type, Seq: int64(seq), Agent: agent,
		Sigs: len(strings.Fields(req.Header.Get("webhook-signature")))})
	w.WriteHeader(http.StatusOK)
}

func (r *hookReceiver) hooks() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// has reports whether a delivery of type typ for agent arrived (count
// times at least).
func (r *hookReceiver) has(agent, typ string, count int) bool {
	n := 0
	for _, h := range r.hooks() {
		if h.Agent == agent && h.Type == typ {
			n++
		}
	}
	return n >= count
}

// TestWebhooksDeliverAnAgentsLife: an endpoint subscribed to every event
// sees an agent's whole life, each webhook-id once, in order, every
// signature verified by the Standard Webhooks library; stopped mid-run, it
// gets what it missed once it is back (the log shows the retries); a replay
// from sequence 1 re-sends all with the same ids; after a rotation every
// delivery verifies with either secret.
func TestWebhooksDeliverAnAgentsLife(t *testing.T) {
	t.Parallel()
	s := start(t)
	recv := newHookReceiver(t)
	r := s.call(http.MethodPost, "/api/v1/webhooks", appKey, map[string]any{"url": recv.url(), "events": []string{"*"}, "description": "all of it"})
	if r.status != http.StatusCreated || !strings.HasPrefix(r.str("secret"), "whsec_") {
		t.Fatalf("create endpoint: %d %s", r.status, r.raw)
	}
	ep, secret := r.str("id"), r.str("secret")
	recv.trust(secret)
	if got := s.call(http.MethodGet, "/api/v1/webhooks/"+ep, appKey, nil); got.status != 200 || strings.Contains(got.raw, secret) {
		t.Errorf("read endpoint: %d %s (the secret is shown once)", got.status, got.raw)
	}

	id, tok := s.mustCreate()
	eventually(t, 30*time.Second, "the agent's first answer, delivered", func() bool { return recv.has(id, "agent.message", 1) })

	// The receiver goes down; the agent ends meanwhile.
	recv.stop()
	if r := s.shutdown(id, tok); r.status != http.StatusOK && r.status != http.StatusAccepted {
		t.Fatalf("shutdown: %d %s", r.status, r.raw)
	}
	var retrying map[string]any
	eventually(t, 60*time.Second, "a delivery retrying in the log", func() bool {
		log := s.call(http.MethodGet, "/api/v1/webhooks/"+ep+"/deliveries?limit=5", appKey, nil)
		ds, _ := log.body["deliveries"].([]any)
		for _, d := range ds {
			if m := d.(map[string]any); m["status"] == "retrying" && m["next_attempt_at"] != nil && m["attempts"].(float64) >= 1 {
				retrying = m
				return true
			}
		}
		return false
	})
	t.Logf("while down: %v", retrying)
	recv.start()
	eventually(t, 60*time.Second, "agent.ended, once the receiver is back", func() bool { return recv.has(id, "agent.ended", 1) })

	life := recv.hooks()
	var types []string
	seen := map[string]bool{}
	last := int64(0)
	for _, h := range life {
		if seen[h.ID] {
			t.Errorf("%s delivered twice", h.ID)
		}
		seen[h.ID] = true
		if h.Seq <= last {
			t.Errorf("%s (%d) after %d: out of order", h.ID, h.Seq, last)
		}
		last = h.Seq
		if h.ID != fmt.Sprintf("msg_%s_%d", id, h.Seq) {
			t.Errorf("webhook-id %s of sequence %d", h.ID, h.Seq)
		}
		types = append(types, h.Type)
	}
	for _, want := range []string{"agent.created", "agent.ready", "agent.message", "agent.state_changed", "agent.ended"} {
		if !slices.Contains(types, want) {
			t.Errorf("the life delivered %q lacks %s", types, want)
		}
	}
	if types[0] != "agent.created" || types[len(types)-1] != "agent.ended" {
		t.Errorf("the life delivered %q: want agent.created first, agent.ended last", types)
	}

	// A replay from sequence 1 re-sends everything with the same ids.
	if r := s.call(http.MethodPost, "/api/v1/webhooks/"+ep+"/replay", appKey, map[string]any{"from_sequence": 1, "agent_id": id}); r.status != http.StatusAccepted {
		t.Fatalf("replay: %d %s", r.status, r.raw)
	}
	eventually(t, 30*time.Second, "the replay", func() bool { return len(recv.hooks()) >= 2*len(life) })
	again := recv.hooks()[len(life):]
	for i := range life {
		if again[i].ID != life[i].ID {
			t.Errorf("replayed %d: %s, first %s", i, again[i].ID, life[i].ID)
		}
	}

	// Rotated: both secrets sign, each verifies alone.
	rot := s.call(http.MethodPost, "/api/v1/webhooks/"+ep+"/rotate", appKey, nil)
	if rot.status != http.StatusOK || rot.str("secret") == secret || rot.str("previous_secret_expires_at") == "" {
		t.Fatalf("rotate: %d %s", rot.status, rot.raw)
	}
	recv.trust(secret, rot.str("secret"))
	before := len(recv.hooks())
	if r := s.call(http.MethodPost, "/api/v1/webhooks/"+ep+"/replay", appKey, map[string]any{"from_sequence": 1, "agent_id": id}); r.status != http.StatusAccepted {
		t.Fatalf("replay after the rotation: %d %s", r.status, r.raw)
	}
	eventually(t, 30*time.Second, "the replay after the rotation", func() bool { return len(recv.hooks()) >= before+len(life) })
	for _, h := range recv.hooks()[before:] {
		if h.Sigs != 2 {
			t.Errorf("%s after a rotation carried %d signatures, want 2", h.ID, h.Sigs)
		}
	}
}

// TestWebhookRequestsAreChecked: the routes' refusals, in the standard
// envelope, and endpoints on private or metadata addresses refused where
// loopback is not allowed (the platform's settings on AWS).
func TestWebhookRequestsAreChecked(t *testing.T) {
	t.Parallel()
	s := start(t, devtest.WithPublicWebhooksOnly())
	post := func(body any) reply { return s.call(http.MethodPost, "/api/v1/webhooks", appKey, body) }
	for _, u := range []string{"http://127.0.0.1:9/hooks", "https://[::1]/hooks", "https://localhost/hooks", "https://169.254.169.254/latest/meta-data",
		"https://10.0.0.7/hooks", "https://metadata.google.internal/", "ftp://example.com/"} {
		wantError(t, post(map[string]any{"url": u, "events": []string{"*"}}), http.StatusBadRequest, "invalid_request")
	}
	wantError(t, post(map[string]any{"url": "https://93.184.215.14/hooks", "events": []string{"agent.nope"}}), http.StatusBadRequest, "invalid_request")
	wantError(t, post(map[string]any{"url": "https://93.184.215.14/hooks", "events": []string{"*"}, "secret": "mine"}), http.StatusBadRequest, "invalid_request")
	wantError(t, post(strings.Repeat(" ", 17<<10)+"{}"), http.StatusRequestEntityTooLarge, "payload_too_large")
	wantError(t, s.call(http.MethodPost, "/api/v1/webhooks", "ra_wrong", map[string]any{"url": "https://93.184.215.14/", "events": []string{"*"}}), http.StatusUnauthorized, "invalid_token")
	r := post(map[string]any{"url": "https://93.184.215.14/hooks", "events": []string{"agent.ended", "agent.failed"}})
	if r.status != http.StatusCreated {
		t.Fatalf("a public address: %d %s", r.status, r.raw)
	}
	wantError(t, s.call(http.MethodGet, "/api/v1/webhooks/wh_aaaaaaaaaaaaaaaaaaaaaaaaaa", appKey, nil), http.StatusNotFound, "webhook_not_found")
	if r := s.call(http.MethodGet, "/api/v1/webhooks/..%2f..%2fetc", appKey, nil); r.status != http.StatusNotFound {
		t.Errorf("a path for an id: %d %s", r.status, r.raw)
	}
	wantError(t, s.call(http.MethodPost, "/api/v1/webhooks/"+r.str("id")+"/replay", appKey, map[string]any{"from_sequence": 1}), http.StatusBadRequest, "invalid_request")
	wantError(t, s.call(http.MethodGet, "/api/v1/webhooks/"+r.str("id")+"/deliveries?limit=1000", appKey, nil), http.StatusBadRequest, "invalid_request")
	if got := s.call(http.MethodPatch, "/api/v1/webhooks/"+r.str("id"), appKey, map[string]any{"disabled": true}); got.status != 200 || got.body["disabled"] != true {
		t.Errorf("disable: %d %s", got.status, got.raw)
	}
	if got := s.call(http.MethodDelete, "/api/v1/webhooks/"+r.str("id"), appKey, nil); got.status != http.StatusNoContent {
		t.Errorf("delete: %d %s", got.status, got.raw)
	}
	if list := s.call(http.MethodGet, "/api/v1/webhooks", appKey, nil); list.status != 200 || strings.TrimSpace(list.raw) != `{"webhooks":[]}` {
		t.Errorf("list after the delete: %d %s", list.status, list.raw)
	}
}

// TestQuotaExceededIsDelivered: a create refused by the live quota is
// delivered as quota.exceeded from the app's own stream, once however many
// times the app retries within the minute.
func TestQuotaExceededIsDelivered(t *testing.T) {
	t.Parallel()
	s := start(t, withConfig(func(c *config.RemoteAgents) { c.Quotas.ConcurrentSessions = 1 }))
	recv := newHookReceiver(t)
	r := s.call(http.MethodPost, "/api/v1/webhooks", appKey, map[string]any{"url": recv.url(), "events": []string{"quota.exceeded"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create endpoint: %d %s", r.status, r.raw)
	}
	recv.trust(r.str("secret"))
	s.mustCreate()
	first := time.Now()
	for range 3 {
		wantError(t, s.create(createBody("one too many")), http.StatusTooManyRequests, "quota_exceeded")
	}
	// Once a minute: twice if the retries straddled one (by the server's
	// clock, read between these two).
	lo, hi := 1, 1
	if time.Now().Truncate(time.Minute) != first.Truncate(time.Minute) {
		hi = 2
	}
	evs, err := s.srv.Env.SessionStore().Events(t.Context(), session.AppStream("dev"), 0, 10)
	if err != nil || len(evs) < lo || len(evs) > hi {
		t.Fatalf("the app's stream: %+v %v; want %d to %d quota.exceeded", evs, err, lo, hi)
	}
	eventually(t, 30*time.Second, "quota.exceeded delivered", func() bool { return len(recv.hooks()) >= len(evs) })
	got := recv.hooks()[0]
	if got.Type != "quota.exceeded" || got.Agent != "" || got.ID != "msg_app_dev_1" {
		t.Errorf("delivered %+v; want quota.exceeded of the app (tenant dev), naming no agent", got)
	}
}
