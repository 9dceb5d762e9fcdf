package systemtest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/shared/config"
)

// BenchmarkViewerPush1 measures, with the embed view in headless Chromium as
// the agent's one viewer, how long an event takes from its append (a
// sandbox's POST /sandbox/{id}/events) to the page, and a piece of the
// agent's reply from the sandbox's POST /sandbox/{id}/deltas to the page:
// both pushed over the push channel, nothing polled.
func BenchmarkViewerPush1(b *testing.B) { viewerPush(b, 0) }

// BenchmarkViewerPush50 is BenchmarkViewerPush1 with 49 more viewers of the
// agent on the push channel (WebSocket clients reading every frame, as the
// page does), so that every push goes to 50.
func BenchmarkViewerPush50(b *testing.B) { viewerPush(b, 49) }

// BenchmarkViewerPushAfterQuiet is an append to the page after 30 s
// (RA_BENCH_QUIET_SECONDS) in which nothing happened to the agent (the
// stream the page read before waited up to its 1 s idle poll).
func BenchmarkViewerPushAfterQuiet(b *testing.B) {
	quiet := 30 * time.Second
	if v, err := strconv.Atoi(os.Getenv("RA_BENCH_QUIET_SECONDS")); err == nil && v > 0 {
		quiet = time.Duration(v) * time.Second
	}
	tab, send, _ := viewerBench(b, 0)
	rec := benchrec.New(b)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		time.Sleep(quiet)
		b.StartTimer()
		rec.AddMillis("append→browser after quiet", send(tab, i))
	}
	b.StopTimer()
	rec.Done()
}

func viewerPush(b *testing.B, others int) {
	tab, send, delta := viewerBench(b, others)
	rec := benchrec.New(b)
	for i := 0; b.Loop(); i++ {
		// Moments spread, not in step with anything.
		b.StopTimer()
		time.Sleep(time.Duration(i*37%50) * time.Millisecond)
		b.StartTimer()
		rec.AddMillis("append→browser", send(tab, i))
		rec.AddMillis("delta→browser", delta(tab, i))
	}
	b.StopTimer()
	rec.Done()
}

// viewerBench starts an agent with the embed view open on it and others
// more viewers, and returns the page and how to measure an append and a
// delta to it (milliseconds, on one clock).
func viewerBench(b *testing.B, others int) (context.Context, func(context.Context, int) float64, func(context.Context, int) float64) {
	s := start(b, fakeSandbox(), withConfig(func(c *config.RemoteAgents) {
		c.CreationTimeout = 20 * time.Second
		c.Quotas.StreamsPerSession = others + 1
	}))
	id, tok, sb, _ := s.readySandbox(b, createBody("bench"))
	if r := s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "working"}); r.status != http.StatusOK {
		b.Fatalf("working: %d %s", r.status, r.raw)
	}
	for range others {
		v := s.watch(b, id, tok, 0)
		v.next("sync")
		go v.drain()
	}
	tab := browser(b)
	inBrowser(b, tab, 20*time.Second,
		chromedp.Navigate(s.srv.URL+"/embed/"+id+"?token="+tok),
		voidPoll(`document.getElementById("app").dataset.connection === "open"`, 15*time.Second),
	)
	value(b, tab, chromedp.Evaluate[bool](`window.__recv = {}; window.__live = {};
addEventListener("remote-agent:event", (e) => { window.__recv[e.detail.id] = performance.timeOrigin + performance.now(); });
addEventListener("remote-agent:live", (e) => { if (e.detail.data && e.detail.data.text) window.__live[e.detail.data.text] = performance.timeOrigin + performance.now(); });
true`))
	now := func() float64 { return float64(time.Now().UnixMicro()) / 1000 }
	wait := func(tab context.Context, expr string) float64 {
		inBrowser(b, tab, 10*time.Second, voidPoll(expr+` !== undefined`, 10*time.Second))
		return value(b, tab, chromedp.Evaluate[float64](expr))
	}
	send := func(tab context.Context, i int) float64 {
		sent := now()
		r := s.call(http.MethodPost, "/sandbox/"+id+"/events", sb, map[string]any{"events": []any{map[string]any{"type": "tool.call", "data": map[string]any{"tool": "bash", "args": "{}", "output": "tick"}}}})
		if r.status != http.StatusOK {
			b.Fatalf("append: %d %s", r.status, r.raw)
		}
		return wait(tab, fmt.Sprintf(`window.__recv[%d]`, int64(r.body["first_seq"].(float64)))) - sent
	}
	offset := 0
	delta := func(tab context.Context, i int) float64 {
		text := fmt.Sprintf("piece-%d ", i)
		sent := now()
		r := s.call(http.MethodPost, "/sandbox/"+id+"/deltas", sb, map[string]any{"deltas": []any{map[string]any{"type": "agent.message.delta",
			"data": map[string]any{"message_id": "bench", "offset": offset, "text": text}}}})
		if r.status != http.StatusOK {
			b.Fatalf("deltas: %d %s", r.status, r.raw)
		}
		offset += len(text)
		return wait(tab, fmt.Sprintf(`window.__live[%q]`, text)) - sent
	}
	return tab, send, delta
}

// drain reads the viewer's frames until its connection closes.
func (v *viewer) drain() {
	for {
		if _, _, err := v.c.Read(context.Background()); err != nil {
			return
		}
	}
}
