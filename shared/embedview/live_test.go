package embedview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/remote-agents/remote-agents/localstack/browsertest"
	"github.com/remote-agents/remote-agents/shared/embedview"
	"github.com/remote-agents/remote-agents/shared/httpapi"
)

const liveToken = "ras_live"

// The live URL the page gets, and the source its connect-src allows for it.
func TestLiveSource(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, page, src string }{
		{"", "", ""},
		{"/@push", "/@push", "'self'"},
		{"/live?x=1", "/live?x=1", "'self'"},
		{"wss://push.example.com/prod", "wss://push.example.com/prod", "wss://push.example.com"},
		{"WSS://Push.Example.com:8443/prod", "WSS://Push.Example.com:8443/prod", "wss://push.example.com:8443"},
		{"ws://127.0.0.1:9000/@push", "ws://127.0.0.1:9000/@push", "ws://127.0.0.1:9000"},
		{"//evil.example/x", "", ""},
		{"/\\evil.example/x", "", ""},
		{"/\t/evil.example", "", ""},
		{"https://push.example.com/", "", ""},
		{"javascript:alert(1)", "", ""},
		{"wss://user:pw@push.example.com/", "", ""},
		{"wss://push.example.com;script-src */x", "", ""},
		{"wss://push.example.com x/", "", ""},
		{"wss:///nohost", "", ""},
		{"push.example.com/x", "", ""},
	}
	for _, c := range cases {
		page, src := embedview.LiveSource(c.in)
		if page != c.page || src != c.src {
			t.Errorf("LiveSource(%q) = %q, %q; want %q, %q", c.in, page, src, c.page, c.src)
		}
	}
	// The page carries it and its policy allows it; without it, neither.
	for _, c := range []struct{ live, attr, connect string }{
		{"wss://push.example.com/prod", `data-live-url="wss://push.example.com/prod"`, "connect-src 'self' wss://push.example.com;"},
		{"/@push", `data-live-url="/@push"`, "connect-src 'self';"},
		{"", "", "connect-src 'self';"},
		{"https://push.example.com/", "", "connect-src 'self';"},
	} {
		h := &embedview.Handlers{Sessions: oneToken{tok: liveToken}, LiveURL: c.live}
		res, err := h.Page(t.Context(), httpapi.Request{PathParameters: map[string]string{"id": agentID}, QueryStringParameters: map[string]string{"token": liveToken}})
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%q: %d %v", c.live, res.StatusCode, err)
		}
		if c.attr != "" && !strings.Contains(res.Body, c.attr) || c.attr == "" && strings.Contains(res.Body, "data-live-url=") {
			t.Errorf("%q: the page's live URL attribute is not %q", c.live, c.attr)
		}
		if csp := res.Headers["Content-Security-Policy"]; !strings.Contains(csp, c.connect) {
			t.Errorf("%q: CSP %q lacks %q", c.live, csp, c.connect)
		}
	}
}

// liveServer serves the real embed page, a fake of the viewers' WebSocket
// (the live protocol; each connection is handed to the test, which plays the
// server's side) and a tiny event stream, on one origin.
type liveServer struct {
	url     string
	conns   chan *liveConn
	opened  atomic.Int32 // live connections accepted
	refused atomic.Int32 // live requests refused (refuse)
	refuse  bool
	csp     atomic.Value // the page's Content-Security-Policy
	// sse: the stream's events (seq 1, 2, …) and the Last-Event-ID of each
	// request for it.
	sse      []map[string]any
	sseCalls chan string
	stop     context.Context
}

// liveConn is one socket the page opened: the agent its query named, and the
// frames the page sent on it.
type liveConn struct {
	agent string
	c     *websocket.Conn
	in    chan map[string]any
	done  chan struct{}
	stop  context.Context
}

func newLiveServer(t *testing.T, liveURL string, refuse bool, sse ...map[string]any) *liveServer {
	t.Helper()
	stop, cancel := context.WithCancel(context.Background())
	ls := &liveServer{conns: make(chan *liveConn, 16), refuse: refuse, sse: sse, sseCalls: make(chan string, 16), stop: stop}
	h := &embedview.Handlers{Sessions: oneToken{tok: liveToken}, LiveURL: liveURL}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /embed/{id}", func(w http.ResponseWriter, r *http.Request) {
		q := map[string]string{}
		for k, v := range r.URL.Query() {
			q[k] = v[0]
		}
		hdr := map[string]string{}
		for k := range r.Header {
			hdr[strings.ToLower(k)] = r.Header.Get(k)
		}
		res, err := h.Page(r.Context(), httpapi.Request{PathParameters: map[string]string{"id": r.PathValue("id")}, QueryStringParameters: q,
			Headers: hdr, Cookies: r.Header.Values("Cookie")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for k, v := range res.Headers {
			w.Header().Set(k, v)
		}
		ls.csp.Store(res.Headers["Content-Security-Policy"])
		w.WriteHeader(res.StatusCode)
		_, _ = io.WriteString(w, res.Body)
	})
	mux.HandleFunc("GET /live", ls.serveLive)
	mux.HandleFunc("GET /api/remote_agents/{id}/events", ls.serveEvents)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(cancel) // before the server closes: its streams and sockets end
	ls.url = srv.URL
	return ls
}

func (ls *liveServer) serveLive(w http.ResponseWriter, r *http.Request) {
	if ls.refuse {
		ls.refused.Add(1)
		http.Error(w, "no live channel here", http.StatusNotFound)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ls.opened.Add(1)
	lc := &liveConn{agent: r.URL.Query().Get("agent"), c: c, in: make(chan map[string]any, 64), done: make(chan struct{}), stop: ls.stop}
	ls.conns <- lc
	defer close(lc.done)
	for {
		var f map[string]any
		if err := wsjson.Read(ls.stop, c, &f); err != nil {
			return
		}
		lc.in <- f
	}
}

func (ls *liveServer) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Session-Token") != liveToken || r.PathValue("id") != agentID {
		http.Error(w, `{"status":401}`, http.StatusUnauthorized)
		return
	}
	last := r.Header.Get("Last-Event-ID")
	ls.sseCalls <- last
	after, _ := strconv.Atoi(last)
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range ls.sse {
		if seq := e["seq"].(int); seq > after {
			raw, _ := json.Marshal(e)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", seq, e["type"], raw)
		}
	}
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-ls.stop.Done():
	}
}

// accept waits for the page's next socket.
func (ls *liveServer) accept(t *testing.T) *liveConn {
	t.Helper()
	select {
	case c := <-ls.conns:
		return c
	case <-time.After(15 * time.Second):
		t.Fatal("the page opened no live socket")
		return nil
	}
}

// next waits for the page's next frame on the socket.
func (c *liveConn) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case f := <-c.in:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("the page sent no frame")
		return nil
	}
}

// expectSync waits for the page's next frame, which must be a sync after
// the given seq, with the agent's id and the session token.
func (c *liveConn) expectSync(t *testing.T, after int) {
	t.Helper()
	f := c.next(t)
	if f["action"] != "sync" || f["agent"] != agentID || f["token"] != liveToken || f["after"] != float64(after) || len(f) != 4 {
		t.Fatalf("the page sent %v, want a sync of its agent after %d with its token", f, after)
	}
}

func (c *liveConn) send(t *testing.T, frame any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.stop, 5*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, c.c, frame); err != nil {
		t.Fatalf("send %v: %v", frame, err)
	}
}

// stored is a stored event as the server sends it.
func stored(seq int, typ string, data map[string]any) map[string]any {
	return map[string]any{"seq": seq, "type": typ, "at": "2025-01-02T03:04:05Z", "data": data}
}

func said(seq int, text string) map[string]any {
	return stored(seq, "agent.message", map[string]any{"text": text, "tool_calls": 0})
}

func delta(id string, offset int, text string) map[string]any {
	return map[string]any{"type": "agent.message.delta", "at": "2025-01-02T03:04:05Z", "data": map[string]any{"message_id": id, "offset": offset, "text": text}}
}

func started(id, tool, args string) map[string]any {
	return map[string]any{"type": "tool.call.started", "at": "2025-01-02T03:04:05Z", "data": map[string]any{"tool_call_id": id, "tool": tool, "args": args}}
}

func events(evs ...map[string]any) map[string]any {
	return map[string]any{"type": "events", "events": evs}
}

func syncAnswer(seq int, more bool, evs ...map[string]any) map[string]any {
	if evs == nil {
		evs = []map[string]any{}
	}
	return map[string]any{"type": "sync", "seq": seq, "more": more, "events": evs}
}

func liveFrame(evs ...map[string]any) map[string]any {
	return map[string]any{"type": "live", "events": evs}
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, 700, 600)
}

// tab opens a tab of the browser on the page of ls, closed when the test ends.
func tab(t *testing.T, b context.Context, ls *liveServer) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	t.Cleanup(cancel)
	// The tab opens on a context without a time limit: the first Run's
	// context is the tab's life.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	run(t, ctx, chromedp.Navigate(ls.url+"/embed/"+agentID+"?token="+liveToken), chromedp.WaitReady(chromedp.CSS(`[data-role="composer"]`)))
	return ctx
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for i, step := range steps {
		if err := chromedp.Do(ctx, step); err != nil {
			t.Fatalf("browser step %d of %d: %v", i+1, len(steps), err)
		}
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// waitFor waits until a JavaScript expression is true in the tab; if it
// does not come true, the test fails with what the thread shows.
func waitFor(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(pctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(12*time.Second))); err != nil {
		t.Fatalf("waiting for %s: %v\nthread: %q", expr, err, thread(t, ctx))
	}
}

// thread is the thread's items: each "seq:class:text".
func thread(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll('[data-role="thread"] > li:not([data-role="working"])')].map((li) => (li.dataset.seq || "") + ":" + li.className + ":" + li.textContent)`)
}

const recordEvents = `window.got = []; addEventListener("remote-agent:event", (e) => window.got.push(e.detail.id + " " + e.detail.type + " " + JSON.parse(e.detail.data).seq)); true`

// The embed view on the live channel, against a fake of its server in a
// real browser.
func TestLive(t *testing.T) {
	t.Parallel()
	b := browser(t)

	// The page syncs with its token, shows what the answer holds and what is
	// pushed, in order, each event once, whatever order the frames come in.
	t.Run("sync and pushed events in order", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false)
		tb := tab(t, b, ls)
		c := ls.accept(t)
		if c.agent != agentID {
			t.Errorf("the socket's agent is %q", c.agent)
		}
		c.expectSync(t, 0)
		eval[bool](t, tb, recordEvents)
		c.send(t, events(said(3, "three"))) // pushed before the answer
		c.send(t, syncAnswer(2, true, stored(1, "user.message", map[string]any{"text": "one"}), said(2, "two")))
		c.expectSync(t, 3) // more: the page asks on, after what it has
		c.send(t, syncAnswer(4, false, said(4, "four")))
		five := said(5, "five")
		five["data"].(map[string]any)["message_id"] = "m5" // a reply that did not stream
		c.send(t, events(five, said(6, "six")))
		c.send(t, events(said(6, "six again")))
		c.send(t, events(said(7, "seven")))
		waitFor(t, tb, `document.querySelector('li[data-seq="7"]') !== null`)
		want := []string{"1:user:one", "2:agent:two", "3:agent:three", "4:agent:four", "5:agent:five", "6:agent:six", "7:agent:seven"}
		if got := thread(t, tb); !slices.Equal(got, want) {
			t.Errorf("thread %q, want %q", got, want)
		}
		var dispatched []string
		for i := 1; i <= 7; i++ {
			typ := "agent.message"
			if i == 1 {
				typ = "user.message"
			}
			dispatched = append(dispatched, fmt.Sprintf("%d %s %d", i, typ, i))
		}
		if got := eval[[]string](t, tb, `window.got`); !slices.Equal(got, dispatched) {
			t.Errorf("remote-agent:event %q, want %q", got, dispatched)
		}
		if state := eval[string](t, tb, `document.getElementById("app").dataset.connection + " " + document.querySelector('[data-role="status"]').textContent`); state != "open Connected" {
			t.Errorf("connection %q", state)
		}
		// The socket opened under connect-src 'self' (no ws: source): Chromium
		// admits the page's own origin's ws: URL under 'self', and refuses
		// another origin's.
		if csp, _ := ls.csp.Load().(string); !strings.Contains(csp, "connect-src 'self';") {
			t.Errorf("CSP %q", csp)
		}
		refused := `new Promise((done) => {
  addEventListener("securitypolicyviolation", (e) => done(e.effectiveDirective + " " + e.blockedURI), { once: true });
  try { new WebSocket("ws://127.0.0.1:9/elsewhere"); } catch (e) { done("threw " + e.name); }
})`
		ctx, cancel := context.WithTimeout(tb, 10*time.Second)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](refused, chromedp.EvalAwaitPromise))
		cancel()
		if err != nil || !strings.HasPrefix(got, "connect-src ws://127.0.0.1:9") && got != "threw SecurityError" {
			t.Errorf("a socket to another origin: %q %v", got, err)
		}
		t.Logf("a socket to another origin: %s", got)
	})

	// A gap still there a second later is asked for again, after the last
	// event shown; the answer fills it, or says the number will never exist.
	t.Run("a gap is repaired by a re-sync", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false)
		tb := tab(t, b, ls)
		c := ls.accept(t)
		c.expectSync(t, 0)
		eval[bool](t, tb, recordEvents)
		c.send(t, syncAnswer(1, false, said(1, "one")))
		waitFor(t, tb, `document.querySelector('li[data-seq="1"]') !== null`)
		gapAt := time.Now()
		c.send(t, events(said(3, "three")))
		c.expectSync(t, 1)
		if waited := time.Since(gapAt); waited < 900*time.Millisecond {
			t.Errorf("re-synced %s after the gap, not a second", waited)
		}
		if n := eval[int](t, tb, `document.querySelectorAll('li[data-seq="3"]').length`); n != 0 {
			t.Errorf("event 3 shown before 2")
		}
		c.send(t, syncAnswer(3, false, said(2, "two"), said(3, "three")))
		waitFor(t, tb, `document.querySelector('li[data-seq="3"]') !== null`)
		// 4 will never be written: the answer's cursor passes it.
		c.send(t, events(said(5, "five")))
		c.expectSync(t, 3)
		c.send(t, syncAnswer(4, false))
		waitFor(t, tb, `document.querySelector('li[data-seq="5"]') !== null`)
		want := []string{"1:agent:one", "2:agent:two", "3:agent:three", "5:agent:five"}
		if got := thread(t, tb); !slices.Equal(got, want) {
			t.Errorf("thread %q, want %q", got, want)
		}
		if got := eval[[]string](t, tb, `window.got`); len(got) != 4 || !strings.HasPrefix(got[3], "5 ") {
			t.Errorf("remote-agent:event %q", got)
		}
	})

	// A reply streams in pieces (offsets in code points), shown as it comes
	// and not announced; the stored reply takes its place, once.
	t.Run("deltas stream a reply", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false)
		tb := tab(t, b, ls)
		c := ls.accept(t)
		c.expectSync(t, 0)
		eval[bool](t, tb, `window.lives = []; addEventListener("remote-agent:live", (e) => window.lives.push(e.detail.type + " " + e.detail.message_id + " " + e.detail.data.offset)); true`)
		c.send(t, syncAnswer(1, false, stored(1, "user.message", map[string]any{"text": "Say hello, and show some Go."})))
		c.send(t, liveFrame(delta("m1", 0, "Hello, ")))
		bubble := `document.querySelector('li.agent[data-message-id="m1"]')`
		waitFor(t, tb, bubble+` !== null && `+bubble+`.textContent === "Hello, "`)
		c.send(t, liveFrame(delta("m1", 7, "wor"), delta("m1", 7, "world"), delta("m1", 100, "x")))
		c.send(t, liveFrame(delta("m1", 12, " 😀"), delta("m1", 14, "é"), delta("m1", 13, "😀é! Here is the code:\n\nx := 1")))
		partial := "Hello, world 😀é! Here is the code:\n\nx := 1"
		waitFor(t, tb, bubble+`.textContent === `+strconv.Quote(partial))
		if got := eval[string](t, tb, bubble+`.dataset.streaming + " " + `+bubble+`.getAttribute("aria-busy") + " " + document.querySelectorAll("li.agent").length`); got != "true true 1" {
			t.Errorf("streaming bubble: %q", got)
		}
		ctx, cancel := context.WithTimeout(tb, 10*time.Second)
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(os.TempDir(), "embed-streaming.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		if live := eval[string](t, tb, `document.querySelector('[data-role="live"]').textContent`); strings.Contains(live, "Hello") {
			t.Errorf("a delta was announced: %q", live)
		}
		wantLives := []string{"agent.message.delta m1 0", "agent.message.delta m1 7", "agent.message.delta m1 7", "agent.message.delta m1 12",
			"agent.message.delta m1 14", "agent.message.delta m1 13"}
		if got := eval[[]string](t, tb, `window.lives`); !slices.Equal(got, wantLives) {
			t.Errorf("remote-agent:live %q, want %q", got, wantLives)
		}
		axe(t, tb, "streaming")

		c.send(t, events(stored(2, "agent.message", map[string]any{"message_id": "m1", "text": "Hello, **world** 😀é! Here is the code:\n\n```go\nx := 1\n```", "tool_calls": 0,
			"html": "<p>Hello, <strong>world</strong> 😀é! Here is the code:</p>\n<pre><code class=\"language-go\">x := 1 // one\n</code></pre>\n"})))
		waitFor(t, tb, bubble+`.dataset.seq === "2"`)
		got := eval[[]string](t, tb, `(() => { const li = document.querySelector('li.agent[data-message-id="m1"]');
  return [String(document.querySelectorAll("li.agent").length), String(li.hasAttribute("data-streaming")), String(li.hasAttribute("aria-busy")),
    li.querySelector("strong") ? li.querySelector("strong").textContent : "", String(li.querySelectorAll('[data-role="copy"]').length),
    li.querySelector(".tok-comment") ? li.querySelector(".tok-comment").textContent : ""]; })()`)
		if want := []string{"1", "false", "false", "world", "1", "// one"}; !slices.Equal(got, want) {
			t.Errorf("final reply (bubbles, streaming, busy, strong, copy, comment) %q, want %q", got, want)
		}
		// A late piece of the stored reply is ignored; the next reply streams.
		c.send(t, liveFrame(delta("m1", 0, "zzz"), delta("m2", 0, "Next")))
		waitFor(t, tb, `document.querySelector('li.agent[data-message-id="m2"]') !== null`)
		if got := eval[[]string](t, tb, `[...document.querySelectorAll("li.agent")].map((li) => li.textContent)`); len(got) != 2 || strings.Contains(got[0], "zzz") || got[1] != "Next" {
			t.Errorf("replies %q", got)
		}
		if n := eval[int](t, tb, `[...document.querySelectorAll('[data-role="live"] p')].filter((p) => p.textContent.startsWith("The agent says: Hello")).length`); n != 1 {
			t.Errorf("the reply was announced %d times", n)
		}
	})

	// A sync's partial shows the reply so far; a socket that closes after it
	// opened reconnects and syncs from the last event shown, and the stored
	// reply replaces the bubble (its stale partial ignored).
	t.Run("a partial in the sync answer, and a re-sync after a close", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false)
		tb := tab(t, b, ls)
		c := ls.accept(t)
		c.expectSync(t, 0)
		answer := syncAnswer(2, false, stored(1, "user.message", map[string]any{"text": "Think."}), stored(2, "state.changed", map[string]any{"state": "working"}))
		answer["partial"] = map[string]any{"message_id": "m9", "offset": 0, "text": "Thinking about"}
		c.send(t, answer)
		bubble := `document.querySelector('li.agent[data-message-id="m9"][data-streaming="true"]')`
		waitFor(t, tb, bubble+` !== null && `+bubble+`.textContent === "Thinking about"`)
		c.send(t, liveFrame(delta("m9", 14, " it")))
		waitFor(t, tb, bubble+`.textContent === "Thinking about it"`)

		_ = c.c.Close(websocket.StatusGoingAway, "bye")
		waitFor(t, tb, `document.getElementById("app").dataset.connection === "reconnecting"`)
		c2 := ls.accept(t)
		c2.expectSync(t, 2)
		answer = syncAnswer(3, false, stored(3, "agent.message", map[string]any{"message_id": "m9", "text": "Thinking about it. Done.", "html": "<p>Thinking about it. Done.</p>", "tool_calls": 0}))
		answer["partial"] = map[string]any{"message_id": "m9", "offset": 0, "text": "Thinking about it. Do"}
		c2.send(t, answer)
		waitFor(t, tb, `document.querySelector('li.agent[data-seq="3"]') !== null && document.getElementById("app").dataset.connection === "open"`)
		if got := eval[[]string](t, tb, `[...document.querySelectorAll("li.agent")].map((li) => li.textContent + " " + li.hasAttribute("data-streaming"))`); !slices.Equal(got, []string{"Thinking about it. Done. false"}) {
			t.Errorf("replies %q", got)
		}
	})

	// A tool call shows as it starts, running; its stored call updates that
	// chip in place.
	t.Run("tool.call.started then tool.call", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false)
		tb := tab(t, b, ls)
		c := ls.accept(t)
		c.expectSync(t, 0)
		c.send(t, syncAnswer(0, false))
		c.send(t, liveFrame(started("c1", "read", `{"path":"notes/a.md"}`), started("c2", "bash", `{"command":"make test"}`), started("c0", "ask_user", `{"question":"?"}`)))
		chips := `[...document.querySelectorAll('[data-role="tool-call"]')].map((li) => li.dataset.toolCallId + " " + li.dataset.status + " " + (li.dataset.seq || "-") + " " + li.className + " " + li.querySelector("summary").textContent)`
		waitFor(t, tb, `document.querySelectorAll('[data-role="tool-call"]').length === 2`)
		want := []string{"c1 running - tool Read a file notes/a.md · running", "c2 running - tool Ran a command make test · running"}
		if got := eval[[]string](t, tb, chips); !slices.Equal(got, want) {
			t.Errorf("started chips %q, want %q", got, want)
		}
		axe(t, tb, "tool running")
		run(t, tb, chromedp.Click(chromedp.CSS(`[data-tool-call-id="c1"] summary`)))
		c.send(t, events(
			stored(1, "tool.call", map[string]any{"tool_call_id": "c1", "tool": "read", "args": `{"path":"notes/a.md"}`, "is_error": false, "output": "# Notes"}),
			stored(2, "tool.call", map[string]any{"tool_call_id": "c2", "tool": "bash", "args": `{"command":"make test"}`, "is_error": true, "output": "The operation encountered an error. exit status 2"}),
		))
		waitFor(t, tb, `document.querySelector('[data-tool-call-id="c2"]').dataset.seq === "2"`)
		want = []string{"c1 done 1 tool Read a file notes/a.md · done", "c2 failed 2 tool error Ran a command make test · failed"}
		if got := eval[[]string](t, tb, chips); !slices.Equal(got, want) {
			t.Errorf("chips %q, want %q", got, want)
		}
		if got := eval[string](t, tb, `document.querySelector('[data-tool-call-id="c1"] details').open + " " + document.querySelector('[data-tool-call-id="c1"] [data-role="tool-output"]').textContent + " " + document.querySelector('[data-tool-call-id="c2"] [data-role="tool-error"]').textContent`); got != "true # Notes Error: exit status 2" {
			t.Errorf("chip details %q", got)
		}
		// A late start of a call shown already adds nothing.
		c.send(t, liveFrame(started("c1", "read", `{"path":"notes/a.md"}`), started("c3", "ls", `{"path":"."}`)))
		waitFor(t, tb, `document.querySelector('[data-tool-call-id="c3"]') !== null`)
		if n := eval[int](t, tb, `document.querySelectorAll('[data-role="tool-call"]').length`); n != 3 {
			t.Errorf("%d chips, want 3", n)
		}
	})

	// The end frame ends the page's connection and closes the composer.
	t.Run("end closes the composer", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false)
		tb := tab(t, b, ls)
		c := ls.accept(t)
		c.expectSync(t, 0)
		c.send(t, syncAnswer(1, false, said(1, "Bye.")))
		c.send(t, liveFrame(delta("m5", 0, "Half a rep")))
		c.send(t, map[string]any{"type": "end"})
		waitFor(t, tb, `document.querySelector('[data-role="composer"]').disabled`)
		got := eval[string](t, tb, `[document.getElementById("app").dataset.connection, document.querySelector('[data-role="status"]').textContent, document.querySelector('[data-role="composer-note"]').textContent, document.querySelectorAll("[data-streaming]").length].join("|")`)
		if got != "closed|Ended|This agent has ended: it takes no more messages.|0" {
			t.Errorf("after end: %q", got)
		}
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Error("the page kept the socket open after end")
		}
	})

	// 401/403/404: the agent is not available here; nothing reconnects.
	t.Run("error 404 closes", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false)
		tb := tab(t, b, ls)
		c := ls.accept(t)
		c.expectSync(t, 0)
		c.send(t, map[string]any{"type": "error", "error": map[string]any{"status": 404, "error_code": "agent_not_found", "message": "No such agent.", "retryable": false}})
		waitFor(t, tb, `document.querySelector('[data-role="composer"]').disabled`)
		got := eval[string](t, tb, `[document.getElementById("app").dataset.connection, document.querySelector('[data-role="status"]').textContent, document.querySelector('[data-role="composer-note"]').textContent].join("|")`)
		if got != "closed|This agent is not available.|This agent is not available: it takes no messages here." {
			t.Errorf("after 404: %q", got)
		}
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Error("the page kept the socket open after 404")
		}
		if len(ls.sseCalls) != 0 {
			t.Error("the page fell back to the event stream after 404")
		}
	})

	// A retryable error: the page reconnects and syncs from where it was.
	t.Run("a retryable error reconnects", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false)
		tb := tab(t, b, ls)
		c := ls.accept(t)
		c.expectSync(t, 0)
		c.send(t, syncAnswer(1, false, said(1, "one")))
		c.send(t, map[string]any{"type": "error", "error": map[string]any{"status": 503, "error_code": "service_unavailable", "message": "Try again.", "retryable": true}})
		c2 := ls.accept(t)
		c2.expectSync(t, 1)
		c2.send(t, syncAnswer(2, false, said(2, "two")))
		waitFor(t, tb, `document.querySelector('li[data-seq="2"]') !== null && document.getElementById("app").dataset.connection === "open"`)
		if got := thread(t, tb); !slices.Equal(got, []string{"1:agent:one", "2:agent:two"}) {
			t.Errorf("thread %q", got)
		}
	})

	// Too many viewers: the event stream takes over, after the last event
	// the socket showed.
	t.Run("error 429 falls back to the event stream", func(t *testing.T) {
		ls := newLiveServer(t, "/live", false, said(1, "one"), said(2, "two"), said(3, "three from the stream"))
		tb := tab(t, b, ls)
		c := ls.accept(t)
		c.expectSync(t, 0)
		c.send(t, syncAnswer(2, false, said(1, "one"), said(2, "two")))
		waitFor(t, tb, `document.querySelector('li[data-seq="2"]') !== null`)
		c.send(t, map[string]any{"type": "error", "error": map[string]any{"status": 429, "error_code": "too_many_streams", "message": "Too many viewers.", "retryable": true}})
		select {
		case last := <-ls.sseCalls:
			if last != "2" {
				t.Errorf("the stream resumed after %q, want 2", last)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the page did not fall back to the event stream")
		}
		waitFor(t, tb, `document.querySelector('li[data-seq="3"]') !== null && document.getElementById("app").dataset.connection === "open"`)
		if got := thread(t, tb); !slices.Equal(got, []string{"1:agent:one", "2:agent:two", "3:agent:three from the stream"}) {
			t.Errorf("thread %q", got)
		}
		if n := ls.opened.Load(); n != 1 {
			t.Errorf("%d sockets, want 1", n)
		}
	})

	// Without a live URL the page reads the event stream only.
	t.Run("no live URL: the event stream", func(t *testing.T) {
		two := said(2, "two from the stream")
		two["data"].(map[string]any)["message_id"] = "m2"
		ls := newLiveServer(t, "", false, said(1, "one from the stream"), two)
		tb := tab(t, b, ls)
		waitFor(t, tb, `document.querySelector('li[data-seq="2"]') !== null && document.getElementById("app").dataset.connection === "open"`)
		if got := thread(t, tb); !slices.Equal(got, []string{"1:agent:one from the stream", "2:agent:two from the stream"}) {
			t.Errorf("thread %q", got)
		}
		if last := <-ls.sseCalls; last != "" {
			t.Errorf("Last-Event-ID %q", last)
		}
		if n := ls.opened.Load() + ls.refused.Load(); n != 0 {
			t.Errorf("%d sockets without a live URL", n)
		}
	})

	// A socket that fails to open 3 times in a row: the event stream.
	t.Run("a socket that never opens: the event stream", func(t *testing.T) {
		ls := newLiveServer(t, "/live", true, said(1, "one from the stream"))
		tb := tab(t, b, ls)
		select {
		case <-ls.sseCalls:
		case <-time.After(20 * time.Second):
			t.Fatalf("the page did not fall back to the event stream (%d attempts)", ls.refused.Load())
		}
		waitFor(t, tb, `document.querySelector('li[data-seq="1"]') !== null && document.getElementById("app").dataset.connection === "open"`)
		if n := ls.refused.Load(); n != 3 {
			t.Errorf("%d attempts to open the socket, want 3", n)
		}
	})
}

// axe runs axe-core (localstack's npm package) in the tab, light and dark,
// and fails the test with each violation; without the package it logs that
// it could not.
func axe(t *testing.T, tb context.Context, state string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "localstack", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Logf("no axe check (npm ci in localstack/): %v", err)
		return
	}
	if !eval[bool](t, tb, `typeof axe === "object"`) {
		if _, err := chromedp.Run(tb, chromedp.Evaluate[chromedp.Void](string(src))); err != nil {
			t.Fatalf("load axe-core: %v", err)
		}
	}
	for _, scheme := range []string{"light", "dark"} {
		run(t, tb, media(&emulation.MediaFeature{Name: "prefers-color-scheme", Value: scheme}))
		ctx, cancel := context.WithTimeout(tb, 30*time.Second)
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then((r) => JSON.stringify(r.violations.map((v) => v.id + ": " + v.nodes.map((n) => n.html).join(" | "))))`, chromedp.EvalAwaitPromise))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var violations []string
		if err := json.Unmarshal([]byte(raw), &violations); err != nil {
			t.Fatal(err)
		}
		for _, v := range violations {
			t.Errorf("%s, %s: axe %s", state, scheme, v)
		}
	}
	run(t, tb, media())
}

func media(features ...*emulation.MediaFeature) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features})
		return err
	})
}
