package systemtest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/shared/config"
)

// BenchmarkEventFanout measures how long an event takes from the sandbox's
// append (POST /sandbox/{id}/events) to its receipt in the embed view, in
// headless Chromium over SSE, on the local stack. One event per iteration, at
// moments spread over the stream's read interval; run with -benchtime=100x (make
// bench) for percentiles.
func BenchmarkEventFanout(b *testing.B) {
	s := start(b, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	id, tok, sb, _ := s.readySandbox(b, createBody("bench"))
	tab := browser(b)
	inBrowser(b, tab, 20*time.Second,
		chromedp.Navigate(s.srv.URL+"/embed/"+id+"?token="+tok),
		chromedp.WaitReady(chromedp.CSS(`[data-role="thread"]`)),
	)
	// The page records when each event arrives, on the same clock as this process.
	value(b, tab, chromedp.Evaluate[bool](`window.__recv = {}; addEventListener("remote-agent:event", (e) => { window.__recv[e.detail.id] = performance.timeOrigin + performance.now(); }); true`))
	rec := benchrec.New(b)
	for i := 0; b.Loop(); i++ {
		// Events arrive at random moments, not in step with the stream's reads.
		b.StopTimer()
		time.Sleep(time.Duration(i*37%100) * time.Millisecond)
		b.StartTimer()
		sent := float64(time.Now().UnixMicro()) / 1000
		r := s.call(http.MethodPost, "/sandbox/"+id+"/events", sb, map[string]any{"events": []any{map[string]any{"type": "agent.message", "data": map[string]any{"text": "tick"}}}})
		if r.status != http.StatusOK {
			b.Fatalf("append: %d %s", r.status, r.raw)
		}
		seq := int64(r.body["first_seq"].(float64))
		inBrowser(b, tab, 10*time.Second, voidPoll(fmt.Sprintf(`window.__recv[%d] !== undefined`, seq), 10*time.Second))
		at := value(b, tab, chromedp.Evaluate[float64](fmt.Sprintf(`window.__recv[%d]`, seq)))
		rec.AddMillis("append→browser", at-sent)
	}
	b.StopTimer()
	rec.Done()
}
