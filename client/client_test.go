package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devtest"
)

// The tests run against the dev server (real handlers, the emulators, agent
// processes with the scripted model), whose every answer is checked against
// api/openapi.json.
func TestMain(m *testing.M) { devtest.Main(m) }

// bounded is the test's context, ended after a minute: a stream that hangs
// fails the test.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func hello() CreateRequest {
	return CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello"}
}

func newClient(t *testing.T, url string, opts ...Option) *Client {
	t.Helper()
	c, err := New(url, devtest.AppKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waits records the client's waits between retries (which it waits).
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) record(d time.Duration) {
	w.mu.Lock()
	w.got = append(w.got, d)
	w.mu.Unlock()
}

// creates records the Idempotency-Key of every create request.
type creates struct {
	mu   sync.Mutex
	keys []string
}

func (c *creates) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/remote_agents/create" {
			c.mu.Lock()
			c.keys = append(c.keys, r.Header.Get("Idempotency-Key"))
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (c *creates) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.keys)
}

// An app's whole run: create, alive, a message and its answer on the
// events, shutdown, and the stream ends once the agent has.
func TestCreateMessageEventsShutdown(t *testing.T) {
	t.Parallel()
	srv := devtest.Start(t)
	c := newClient(t, srv.URL)
	ctx := bounded(t)
	agent, err := c.Create(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	if agent.Status != "ready" || agent.Workspace.Status == "" || agent.AgentID == "" || agent.SessionToken == "" || !strings.Contains(agent.EmbedURL, "/embed/"+agent.AgentID) {
		t.Fatalf("created: %+v", agent)
	}
	alive, err := c.Alive(ctx, agent.AgentID, agent.SessionToken)
	if err != nil || !alive.Alive {
		t.Fatalf("alive: %+v %v", alive, err)
	}
	receipt, err := c.SendMessage(ctx, agent.AgentID, agent.SessionToken, Message{Text: "ping"})
	if err != nil || receipt.Status != "queued" || receipt.MessageID == 0 || receipt.ClientMessageID == "" {
		t.Fatalf("message: %+v %v", receipt, err)
	}
	var types []string
	answered := false
	for ev, err := range c.Events(ctx, agent.AgentID, agent.SessionToken) {
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		types = append(types, ev.Type)
		if ev.Type == EventAgentMessage && strings.Contains(ev.Text(), "ping") && !answered {
			answered = true
			out, err := c.Shutdown(ctx, agent.AgentID, agent.SessionToken)
			if err != nil || out.Status != "shutdown_initiated" {
				t.Fatalf("shutdown: %+v %v", out, err)
			}
		}
	}
	if !answered {
		t.Fatalf("no answer to the message; events: %v", types)
	}
	// The stream ended: the agent has ended.
	alive, err = c.Alive(ctx, agent.AgentID, agent.SessionToken)
	if err != nil || alive.Alive {
		t.Errorf("alive after the stream ended: %+v %v", alive, err)
	}
}

// Errors are the envelope, typed; one that is not retryable is not retried.
func TestErrorsAreTyped(t *testing.T) {
	t.Parallel()
	seen := &creates{}
	srv := devtest.Start(t, devtest.WithHandler(seen.wrap))
	c := newClient(t, srv.URL)
	_, err := c.Create(t.Context(), CreateRequest{ProjectName: "nope", PersonaSlug: "assistant", InitialPrompt: "x"})
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != CodeProjectNotFound || e.Retryable || e.Message == "" {
		t.Fatalf("create of no project: %#v", err)
	}
	if n := len(seen.list()); n != 1 {
		t.Errorf("%d create requests for an error that is not retryable", n)
	}
	_, err = c.Create(t.Context(), CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "x", AgentType: "nope"})
	if !IsCode(err, CodeAgentTypeNotFound) {
		t.Errorf("create of an unknown agent type: %v", err)
	}
	_, err = c.Create(t.Context(), CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "x",
		TaskContext: &TaskContext{RepositoryURL: "file:///etc"}})
	if !IsCode(err, CodeInvalidRequest) {
		t.Errorf("create with a file: repository: %v", err)
	}
	_, err = c.Alive(t.Context(), "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b6a", "")
	if !IsCode(err, CodeMissingToken) {
		t.Errorf("alive without a token: %v", err)
	}
	agent, err := c.Create(t.Context(), hello())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendMessage(t.Context(), agent.AgentID, "not-the-token", Message{Text: "x"})
	if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != CodeInvalidToken {
		t.Errorf("message with a wrong token: %#v", err)
	}
	for _, err := range c.Events(t.Context(), agent.AgentID, "not-the-token") {
		if !IsCode(err, CodeInvalidToken) {
			t.Errorf("events with a wrong token: %v", err)
		}
	}
}

// A create that outlasts the server's creation timeout (408, the agent still
// starting) is asked again with the same Idempotency-Key, which waits for the
// same agent: one sandbox.
func TestCreateRetriesTimeoutWithTheSameKey(t *testing.T) {
	t.Parallel()
	seen := &creates{}
	// The sandbox takes 3 s to start; each create waits 1 s.
	srv := devtest.Start(t, devtest.WithHandler(seen.wrap), devtest.WithCreationTimeout(time.Second),
		devtest.WithSandbox("/bin/sh", "-c", "sleep 3; exec "+devtest.Agent()+" sandbox"))
	c := newClient(t, srv.URL, WithMaxRetries(0)) // 408 is retried regardless
	agent, err := c.Create(t.Context(), hello())
	if err != nil {
		t.Fatal(err)
	}
	keys := seen.list()
	if len(keys) < 2 || keys[0] == "" || slices.IndexFunc(keys, func(k string) bool { return k != keys[0] }) >= 0 {
		t.Errorf("create requests' Idempotency-Keys: %q; want two or more, all the same", keys)
	}
	if n := len(srv.Launcher.Running()); n != 1 {
		t.Errorf("%d sandboxes after a retried create", n)
	}
	if agent.Status != "ready" {
		t.Errorf("created: %+v", agent)
	}
	// A key of the app's own is the one sent.
	keyed, err := c.Create(t.Context(), CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello"}, WithIdempotencyKey("app-key-1"))
	if err != nil {
		t.Fatal(err)
	}
	if keys := seen.list(); keys[len(keys)-1] != "app-key-1" || keyed.AgentID == agent.AgentID {
		t.Errorf("keys %q, agents %s %s", keys, keyed.AgentID, agent.AgentID)
	}
}

// A retryable 503 is retried after its Retry-After, with the same key.
func TestCreateWaitsRetryAfterOnUnavailable(t *testing.T) {
	t.Parallel()
	seen := &creates{}
	var once sync.Once
	// The first create meets an outage (answered as the handlers answer one).
	outage := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hit := false
			if r.URL.Path == "/api/remote_agents/create" {
				once.Do(func() { hit = true })
			}
			if !hit {
				h.ServeHTTP(w, r)
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"status":503,"error_code":"service_unavailable","message":"try again shortly","retryable":true,"retry_after_seconds":2}`)
		})
	}
	srv := devtest.Start(t, devtest.WithHandler(seen.wrap), devtest.WithHandler(outage))
	c := newClient(t, srv.URL)
	w := &waits{}
	c.notify = w.record
	if _, err := c.Create(t.Context(), hello()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.got, []time.Duration{2 * time.Second}) {
		t.Errorf("waits %v, want the 2 s of Retry-After", w.got)
	}
	if keys := seen.list(); len(keys) != 2 || keys[0] != keys[1] {
		t.Errorf("create requests' keys: %q", keys)
	}
}

// dropper lets the test cut the events stream the client is reading, and
// records, for each events request, its Last-Event-ID and the last event the
// client had handed out when it sent it (requests are sent from the loop's
// goroutine, between its iterations).
type dropper struct {
	mu       sync.Mutex
	current  io.Closer
	dropped  bool
	drops    int
	lastSeen int64
	resumed  [][2]string
}

func (d *dropper) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && strings.HasSuffix(r.URL.Path, "/events") {
		// As on AWS, where the stream's requests are signed on their way.
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Session-Token") == "" {
			_ = res.Body.Close()
			return nil, errors.New("the events request carries its token in Authorization, which CloudFront overwrites on AWS")
		}
		d.mu.Lock()
		d.current, d.dropped = res.Body, false
		d.resumed = append(d.resumed, [2]string{r.Header.Get("Last-Event-ID"), strconv.FormatInt(d.lastSeen, 10)})
		d.mu.Unlock()
	}
	return res, err
}

// saw notes the event the loop got; the first two times a connection
// delivers one, the connection is cut (events it had buffered still come).
func (d *dropper) saw(ev Event, drop bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lastSeen = ev.Seq
	if drop && !d.dropped && d.drops < 2 {
		_ = d.current.Close()
		d.dropped = true
		d.drops++
	}
}

// A stream that drops is resumed with Last-Event-ID: every event comes
// once, in order, as a fresh read of the whole stream has them.
func TestEventsResumeAfterADroppedConnection(t *testing.T) {
	t.Parallel()
	srv := devtest.Start(t)
	d := &dropper{}
	c := newClient(t, srv.URL, WithHTTPClient(&http.Client{Transport: d}))
	ctx := bounded(t)
	agent, err := c.Create(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	var got []Event
	sent, ended := false, false
	for ev, err := range c.Events(ctx, agent.AgentID, agent.SessionToken) {
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		got = append(got, ev)
		// Cut the first connection at once, the next after the second
		// message is sent, while its events are coming.
		d.saw(ev, len(got) == 1 || sent)
		switch {
		case ev.Type == EventAgentMessage && !sent:
			sent = true
			if _, err := c.SendMessage(ctx, agent.AgentID, agent.SessionToken, Message{Text: "second"}); err != nil {
				t.Fatal(err)
			}
		case ev.Type == EventAgentMessage && strings.Contains(ev.Text(), "second") && !ended:
			ended = true
			if _, err := c.Shutdown(ctx, agent.AgentID, agent.SessionToken); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !ended {
		t.Fatalf("the stream ended before the answer; got %d events", len(got))
	}
	for i, ev := range got {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: lost or repeated events", i, ev.Seq)
		}
	}
	d.mu.Lock()
	resumed, drops := slices.Clone(d.resumed), d.drops
	d.mu.Unlock()
	if drops != 2 || len(resumed) < 3 || resumed[0][0] != "" {
		t.Errorf("%d drops; events requests (Last-Event-ID, last event seen): %q", drops, resumed)
	}
	for _, r := range resumed[1:] {
		if r[0] != r[1] {
			t.Errorf("resumed with Last-Event-ID %q after event %s", r[0], r[1])
		}
	}
	// A fresh read of the whole stream has the same events.
	var all []Event
	for ev, err := range c.Events(ctx, agent.AgentID, agent.SessionToken) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ev)
	}
	if len(all) != len(got) {
		t.Fatalf("read once: %d events, resumed: %d", len(all), len(got))
	}
	for i := range all {
		if all[i].Seq != got[i].Seq || all[i].Type != got[i].Type || string(all[i].Data) != string(got[i].Data) {
			t.Errorf("event %d: %+v, resumed %+v", i, all[i], got[i])
		}
	}
	// After: only the later events.
	for ev, err := range c.Events(ctx, agent.AgentID, agent.SessionToken, After(int64(len(all)-1))) {
		if err != nil || ev.Seq != int64(len(all)) {
			t.Errorf("after %d: %+v %v", len(all)-1, ev, err)
		}
	}
}

// A file is attached to a message, and env values are submitted; the
// events show the file by name and the env by keys.
func TestAttachAndSubmitEnv(t *testing.T) {
	t.Parallel()
	srv := devtest.Start(t)
	c := newClient(t, srv.URL)
	ctx := bounded(t)
	req := hello()
	req.FeatureFlags = &Features{FileUpload: true}
	agent, err := c.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !agent.FeatureFlags.FileUpload {
		t.Fatalf("created: %+v", agent)
	}
	att, err := c.Attach(ctx, agent.AgentID, agent.SessionToken, "notes.txt", "text/plain", 5, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, agent.AgentID, agent.SessionToken, Message{Text: "see the file", Attachments: []Attachment{att}}); err != nil {
		t.Fatal(err)
	}
	env, err := c.SubmitEnv(ctx, agent.AgentID, agent.SessionToken, EnvSubmission{Values: map[string]string{"API_TOKEN": "s3cret"}})
	if err != nil || env.Status != "submitted" || !slices.Equal(env.Keys, []string{"API_TOKEN"}) {
		t.Fatalf("env: %+v %v", env, err)
	}
	file, keys := false, false
	for ev, err := range c.Events(ctx, agent.AgentID, agent.SessionToken) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ev.Data), "s3cret") {
			t.Errorf("an env value in event %s", ev.Data)
		}
		switch ev.Type {
		case EventUserMessage:
			file = file || strings.Contains(string(ev.Data), `"name":"notes.txt"`)
		case EventEnvSubmitted:
			keys = strings.Contains(string(ev.Data), "API_TOKEN")
		}
		if file && keys {
			break // the loop may stop the stream
		}
	}
	if !file || !keys {
		t.Errorf("file in a user.message: %v, keys in env.submitted: %v", file, keys)
	}
}

// A stream that reports an outage (an unavailable event) is reopened after
// the envelope's retry_after_seconds, from where it was.
func TestEventsResumeAfterAnOutage(t *testing.T) {
	t.Parallel()
	var once sync.Once
	outage := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hit := false
			if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/remote_agents/") && strings.HasSuffix(r.URL.Path, "/events") {
				once.Do(func() { hit = true })
			}
			if !hit {
				h.ServeHTTP(w, r)
				return
			}
			// As eventsapi ends a stream whose events cannot be read.
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			_, _ = io.WriteString(w, "retry: 1000\n\nretry: 5000\nevent: unavailable\ndata: {\"status\":503,\"error_code\":\"service_unavailable\",\"message\":\"try again shortly\",\"retryable\":true,\"retry_after_seconds\":5}\n\n")
		})
	}
	srv := devtest.Start(t, devtest.WithHandler(outage))
	c := newClient(t, srv.URL)
	var waited []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error {
		waited = append(waited, d) // the test does not wait them
		return nil
	}
	ctx := bounded(t)
	agent, err := c.Create(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	var first Event
	for ev, err := range c.Events(ctx, agent.AgentID, agent.SessionToken) {
		if err != nil {
			t.Fatal(err)
		}
		first = ev
		break
	}
	if first.Seq != 1 || !slices.Equal(waited, []time.Duration{5 * time.Second}) {
		t.Errorf("first event %+v after waits %v; want seq 1 after 5 s", first, waited)
	}
}

func TestNewRefusesABadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "127.0.0.1:8080", "http://"} {
		if _, err := New(u, "k"); err == nil {
			t.Errorf("New(%q) took it", u)
		}
	}
}

// RunTool runs workspace tools in the agent's real sandbox; an unknown tool
// is a typed error.
func TestRunTool(t *testing.T) {
	t.Parallel()
	srv := devtest.Start(t)
	c := newClient(t, srv.URL)
	ctx := bounded(t)
	agent, err := c.Create(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.RunTool(ctx, agent.AgentID, agent.SessionToken, "bash", map[string]any{"command": "echo from-the-sandbox > note.txt && cat note.txt"})
	if err != nil || res.IsError || !strings.Contains(res.Output, "from-the-sandbox") || res.RequestID == "" {
		t.Fatalf("bash: %+v %v", res, err)
	}
	res, err = c.RunTool(ctx, agent.AgentID, agent.SessionToken, "read", map[string]any{"path": "note.txt"})
	if err != nil || res.IsError || !strings.Contains(res.Output, "from-the-sandbox") {
		t.Fatalf("read: %+v %v", res, err)
	}
	if _, err := c.RunTool(ctx, agent.AgentID, agent.SessionToken, "ssh", map[string]any{}); !IsCode(err, CodeToolNotFound) {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := c.Shutdown(ctx, agent.AgentID, agent.SessionToken); err != nil {
		t.Fatal(err)
	}
}
