package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/shared/config"
)

// The embed view, when it cannot open its live socket (the proxy refuses
// it), reads its event stream as the HTML standard's event stream
// interpretation says. First the page's parser itself, in the page, on a table
// of streams, each fed in the chunks given and byte by byte. Then end to end:
// the page, served through a proxy at the same origin, gets a crafted stream in
// network chunks (a BOM, a comment, CRLF and CR line ends, a CR and its LF in two
// chunks, fields without a space after the colon, one event's JSON over two data
// lines, multi-byte characters split between chunks, a retry), renders it,
// reconnects after the stream's retry with Last-Event-ID, renders a real event
// of the dev server whose text holds line breaks of every kind, and ends on the
// server's end event.
func TestEmbedViewReadsTheEventStream(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	id, tok, sb, _ := s.readySandbox(t, createBody("Hi"))
	// After the agent's lifecycle so far, seq one and two, which the crafted
	// stream stands in for.
	one := s.lastSeq(t, id) + 1
	two := strconv.FormatInt(one+1, 10)
	s.emit(t, id, sb, "one", "two")

	crafted := []string{
		"\xEF\xBB\xBF: a comment\r\nretry:2500\r\n\r\n",
		fmt.Sprintf("id:%d\r\nevent:agent.message\r\ndata:{\"seq\":%d,\"type\":\"agent.message\",\r", one, one),
		"\ndata: \"data\":{\"text\":\"Two lines,\\nand caf\xC3",
		"\xA9 \xE2\x9C",
		"\x93 \xE2\x82\xAC\"}}\r\n\r\n",
		"id: " + two + "\nevent: agent.message\ndata: {\"seq\":" + two + ",\"type\":\"agent.message\",\"data\":{\"text\":\"Second\"}}\n\n",
	}
	p := newStreamProxy(t, s.srv.URL, "/api/remote_agents/"+id+"/events", crafted)
	tab := browser(t)
	inBrowser(t, tab, 30*time.Second,
		chromedp.Navigate(p.url+"/embed/"+id+"?token="+tok),
		chromedp.WaitReady(chromedp.CSS(`[data-role="thread"]`)),
	)

	// The parser, on its own.
	for _, c := range parserCases {
		t.Run(c.name, func(t *testing.T) {
			retry := c.retry
			if retry == 0 {
				retry = 1000
			}
			bytewise := make([][]string, len(c.conns))
			for i, conn := range c.conns {
				for _, b := range []byte(strings.Join(conn, "")) {
					bytewise[i] = append(bytewise[i], string([]byte{b}))
				}
			}
			for _, conns := range [][][]string{c.conns, bytewise} {
				got := parseInPage(t, tab, conns)
				if !slices.Equal(got.Events, c.want) || got.LastEventID != c.lastID || got.Retry != retry {
					t.Errorf("chunks %q:\ngot  %+v last id %q retry %d\nwant %+v last id %q retry %d",
						conns, got.Events, got.LastEventID, got.Retry, c.want, c.lastID, retry)
				}
			}
		})
	}

	// The page, on the crafted stream.
	want := []string{"Two lines,\nand café ✓ €", "Second"}
	if got := agentMessages(t, tab, len(want)); !slices.Equal(got, want) {
		t.Errorf("rendered %q, want %q", got, want)
	}

	// The crafted stream ends; the page reconnects after its retry, resuming
	// after its last event at the dev server itself.
	lastID, waited := p.reconnect(t, 15*time.Second)
	if lastID != two {
		t.Errorf("reconnected with Last-Event-ID %q, want %s", lastID, two)
	}
	if waited < 2*time.Second {
		t.Errorf("reconnected after %s, not after the stream's retry (2.5s)", waited)
	}
	// The dev server's events carry the text also as HTML (Markdown), which the
	// page shows: the text as the page parsed it is what each event came with.
	value(t, tab, chromedp.Evaluate[bool](`window.received = []; addEventListener("remote-agent:event", (e) => window.received.push(JSON.parse(e.detail.data).data.text)); true`))
	tricky := "Line one\nline two\r\nthree\rfour\u2028five: data: x\n\nid: 99\n\u00a0naïve ✓ € 😀"
	s.emit(t, id, sb, tricky)
	if got := agentMessages(t, tab, 3); !slices.Equal(got[:2], want) {
		t.Errorf("after reconnecting, rendered %q, want %q first", got, want)
	}
	if got := value(t, tab, chromedp.Evaluate[[]string](`window.received`)); !slices.Equal(got, []string{tricky}) {
		t.Errorf("after reconnecting, the page parsed %q, want %q", got, tricky)
	}
	saveArtifact(t, "embed-event-stream.png", value(t, tab, chromedp.FullScreenshot(100)))

	// The end event still ends the page's stream.
	s.shutdown(id, tok)
	s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "ended"})
	inBrowser(t, tab, 20*time.Second, voidPoll(`document.querySelector('[data-role="status"]').textContent === "Ended"`, 15*time.Second))
}

// agentMessages waits until the thread shows n agent messages (or more) and
// returns their texts; it fails with what the thread shows if they do not come.
func agentMessages(t *testing.T, tab context.Context, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 15*time.Second)
	defer cancel()
	poll := fmt.Sprintf(`document.querySelectorAll('[data-role="thread"] li.agent').length >= %d`, n)
	_, err := chromedp.Run(ctx, voidPoll(poll, 15*time.Second))
	got := value(t, tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-role="thread"] li.agent')].map(li => li.textContent)`))
	if err != nil {
		t.Fatalf("%d agent messages, not %d: %q (%v)", len(got), n, got, err)
	}
	return got
}

// sseMessage is one event the page's parser dispatched.
type sseMessage struct {
	Type        string `json:"type"`
	Data        string `json:"data"`
	LastEventID string `json:"lastEventId"`
}

func msg(data string) sseMessage { return sseMessage{Type: "message", Data: data} }

// parserCases are streams (each a connection's body in chunks) and what the
// page's parser makes of them: the events, the last event id and the retry
// (0: the page's default).
var parserCases = []struct {
	name   string
	conns  [][]string
	want   []sseMessage
	lastID string
	retry  int
}{
	{name: "one event", conns: [][]string{{"data: hello\n\n"}}, want: []sseMessage{msg("hello")}},
	{name: "data lines joined by LF", conns: [][]string{{"data: line one\ndata: line two\n\n"}}, want: []sseMessage{msg("line one\nline two")}},
	{name: "CRLF", conns: [][]string{{"event: x\r\ndata: a\r\ndata: b\r\n\r\n"}}, want: []sseMessage{{Type: "x", Data: "a\nb"}}},
	{name: "CR", conns: [][]string{{"data: a\rdata: b\r\rdata: c\r\r"}}, want: []sseMessage{msg("a\nb"), msg("c")}},
	{name: "CR and LF in two chunks end one line", conns: [][]string{{"data: a\r", "\ndata: b\r", "\n\r", "\n"}}, want: []sseMessage{msg("a\nb")}},
	{name: "LF after an LF is a blank line", conns: [][]string{{"data: a\n", "\ndata: b\r\n", "\n"}}, want: []sseMessage{msg("a"), msg("b")}},
	{name: "comments", conns: [][]string{{": hello\ndata: x\n:\n: data: y\n\n"}}, want: []sseMessage{msg("x")}},
	{name: "one space after the colon is dropped", conns: [][]string{{"data:x\ndata:  y\ndata: \ndata:\n\n"}}, want: []sseMessage{msg("x\n y\n\n")}},
	{name: "colons in the value", conns: [][]string{{"data: a: b:c\n\n"}}, want: []sseMessage{msg("a: b:c")}},
	{name: "a field without a colon has an empty value", conns: [][]string{{"data\n\ndata\ndata\n\n"}}, want: []sseMessage{msg(""), msg("\n")}},
	{name: "unknown fields are ignored; names are case-sensitive", conns: [][]string{{"Data: x\nfoo: y\ndata : z\ndata: w\n\n"}}, want: []sseMessage{msg("w")}},
	{name: "event sets the type for one event", conns: [][]string{{"event: a\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n"}},
		want: []sseMessage{{Type: "a", Data: "1"}, msg("2"), msg("3")}},
	{name: "no data, no event", conns: [][]string{{"event: x\n\n\n\ndata: y\n\n"}}, want: []sseMessage{msg("y")}},
	{name: "the id lasts until the next", conns: [][]string{{"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"}},
		want: []sseMessage{{"message", "a", "7"}, {"message", "b", "7"}, {"message", "c", ""}}},
	{name: "an id with NUL is ignored", conns: [][]string{{"id: 7\ndata: a\n\nid: 8\x00\ndata: b\n\n"}},
		want: []sseMessage{{"message", "a", "7"}, {"message", "b", "7"}}, lastID: "7"},
	{name: "an id without data sets the last event id", conns: [][]string{{"id: 3\n\n"}}, lastID: "3"},
	{name: "the id outlives a connection; an unfinished event does not", conns: [][]string{{"id: 5\ndata: a\n\nid: 6\ndata: b\n"}, {"data: c\n\n"}},
		want: []sseMessage{{"message", "a", "5"}, {"message", "c", "5"}}, lastID: "5"},
	{name: "retry", conns: [][]string{{"retry: 2500\n\n"}}, retry: 2500},
	{name: "retry ignores all but digits", conns: [][]string{{"retry: 300\nretry: 25x\nretry: -1\nretry:\nretry: 1.5\nretry:  7\n\n"}}, retry: 300},
	{name: "a leading BOM is skipped", conns: [][]string{{"\xEF\xBB", "\xBFdata: a\n\n"}}, want: []sseMessage{msg("a")}},
	{name: "only one BOM is skipped", conns: [][]string{{"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n"}}, want: []sseMessage{msg("b")}},
	{name: "a BOM later is data", conns: [][]string{{"data: \xEF\xBB\xBFa\n\n"}}, want: []sseMessage{msg("\ufeffa")}},
	{name: "characters split between chunks", conns: [][]string{{"data: caf\xC3", "\xA9 \xE2\x9C", "\x93 \xF0\x9F", "\x98", "\x80\n\n"}}, want: []sseMessage{msg("café ✓ 😀")}},
	{name: "invalid UTF-8", conns: [][]string{{"data: \xFF\xC3\n\n"}}, want: []sseMessage{msg("\ufffd\ufffd")}},
}

// parsed is what the page's parser made of some connections.
type parsed struct {
	Events      []sseMessage `json:"events"`
	LastEventID string       `json:"lastEventId"`
	Retry       int          `json:"retry"`
}

// parseInPage runs the page's own parser, eventStream in embed.js, on the
// connections' chunks.
func parseInPage(t *testing.T, tab context.Context, conns [][]string) parsed {
	t.Helper()
	bytes := make([][][]int, len(conns))
	for i, chunks := range conns {
		for _, c := range chunks {
			b := make([]int, len(c))
			for j := range len(c) {
				b[j] = int(c[j])
			}
			bytes[i] = append(bytes[i], b)
		}
	}
	arg, err := json.Marshal(bytes)
	if err != nil {
		t.Fatal(err)
	}
	return value(t, tab, chromedp.Evaluate[parsed](fmt.Sprintf(`((conns) => {
  const source = { lastEventId: "", retry: 1000 };
  const events = [];
  for (const chunks of conns) {
    const read = eventStream(source);
    for (const c of chunks) events.push(...read(new Uint8Array(c)));
  }
  return { events, lastEventId: source.lastEventId, retry: source.retry };
})(%s)`, arg)))
}

// streamProxy passes requests to the dev server, except the first request for
// the event stream, which it answers with crafted chunks, flushed apart.
type streamProxy struct {
	url   string
	again chan reconnection // later requests for the event stream

	mu     sync.Mutex
	served bool
	ended  time.Time // when the crafted stream ended
}

type reconnection struct {
	lastEventID string
	at          time.Time
}

func newStreamProxy(t *testing.T, target, eventsPath string, chunks []string) *streamProxy {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(to) }}
	p := &streamProxy{again: make(chan reconnection, 10)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/@push" {
			// The push channel is down: the page falls back to the event
			// stream, which this test is about.
			http.Error(w, "push channel down", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == eventsPath {
			p.mu.Lock()
			first := !p.served
			p.served = true
			p.mu.Unlock()
			if !first {
				p.again <- reconnection{r.Header.Get("Last-Event-ID"), time.Now()}
				proxy.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			// Each chunk goes out on its own (a chunk of the HTTP body); how the
			// browser's reads group them is its own affair, which the parser
			// table, fed byte by byte, covers deterministically.
			for _, c := range chunks {
				_, _ = w.Write([]byte(c))
				w.(http.Flusher).Flush()
			}
			p.mu.Lock()
			p.ended = time.Now()
			p.mu.Unlock()
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// reconnect waits for the page to open the event stream again and returns the
// Last-Event-ID it sent and how long after the crafted stream ended it came.
func (p *streamProxy) reconnect(t *testing.T, within time.Duration) (string, time.Duration) {
	t.Helper()
	select {
	case r := <-p.again:
		p.mu.Lock()
		defer p.mu.Unlock()
		return r.lastEventID, r.at.Sub(p.ended)
	case <-time.After(within):
		t.Fatalf("the page did not reconnect within %s", within)
		return "", 0
	}
}
