package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/session"
)

// BenchmarkViewerPush1 measures, with the embed view in headless Chromium as
// the agent's one viewer, how long an event takes from being stored (the
// append's write done, as the session store's hook hears it) to the page,
// and from the sandbox's POST /sandbox/{id}/events to the page; and a piece
// of the agent's reply from the sandbox's POST /sandbox/{id}/deltas to the
// page (what streaming adds to the model's own pace). All pushed over the
// push channel, nothing polled.
func BenchmarkViewerPush1(b *testing.B) { viewerPush(b, 0) }

// BenchmarkViewerPush50 is BenchmarkViewerPush1 with 49 more viewers of the
// agent on the push channel (WebSocket clients reading every frame, as the
// page does), so that every push goes to 50.
func BenchmarkViewerPush50(b *testing.B) { viewerPush(b, 49) }

// BenchmarkViewerPushAfterQuiet is an event to the page after 30 s
// (RA_BENCH_QUIET_SECONDS) in which nothing happened to the agent (the
// stream the page read before read the table once a second once idle).
func BenchmarkViewerPushAfterQuiet(b *testing.B) {
	quiet := 30 * time.Second
	if v, err := strconv.Atoi(os.Getenv("RA_BENCH_QUIET_SECONDS")); err == nil && v > 0 {
		quiet = time.Duration(v) * time.Second
	}
	vb := newViewerBench(b, 1)
	rec := benchrec.New(b)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		time.Sleep(quiet)
		b.StartTimer()
		stored, posted := vb.append()
		rec.AddMillis("stored→browser after quiet", stored)
		rec.AddMillis("POST→browser after quiet", posted)
		rec.AddMillis("stored→socket after quiet", vb.socket())
	}
	b.StopTimer()
	rec.Done()
}

func viewerPush(b *testing.B, others int) {
	vb := newViewerBench(b, others)
	rec := benchrec.New(b)
	for i := 0; b.Loop(); i++ {
		// Moments spread, not in step with anything.
		b.StopTimer()
		time.Sleep(time.Duration(i*37%50) * time.Millisecond)
		b.StartTimer()
		stored, posted := vb.append()
		rec.AddMillis("stored→browser", stored)
		rec.AddMillis("POST→browser", posted)
		rec.AddMillis("delta→browser", vb.delta(i))
	}
	b.StopTimer()
	rec.Done()
}

// viewerBench is an agent with the embed view open on it, and more
// viewers.
type viewerBench struct {
	b       *testing.B
	s       *stack
	id, sb  string
	tab     context.Context
	mu      sync.Mutex
	arrived *sync.Cond        // on mu: got has more
	stored  map[int64]float64 // when each event was stored, by number
	got     map[int64]float64 // when the first WebSocket viewer got it
	last    int64
	offset  int
}

// benchNow is the time as the page's clock reads it, in milliseconds.
func benchNow() float64 { return float64(time.Now().UnixMicro()) / 1000 }

func newViewerBench(b *testing.B, others int) *viewerBench {
	vb := &viewerBench{b: b, stored: map[int64]float64{}, got: map[int64]float64{}}
	vb.arrived = sync.NewCond(&vb.mu)
	hear := option(func(o *devserver.Options) {
		o.OnAppend = func(_ string, events []session.Event) {
			at := benchNow()
			vb.mu.Lock()
			defer vb.mu.Unlock()
			for _, e := range events {
				vb.stored[e.Seq] = at
			}
		}
	})
	// A sandbox that lives through the quiet, heart-beating below.
	sandbox := withSandbox("/bin/sh", "-c", `echo "$RA_BOOTSTRAP_CODE" > code; exec sleep 3600`)
	vb.s = start(b, sandbox, hear, withConfig(func(c *config.RemoteAgents) {
		c.CreationTimeout = 20 * time.Second
		c.Quotas.StreamsPerSession = others + 1
	}))
	id, tok, sb, _ := vb.s.readySandbox(b, createBody("bench"))
	vb.id, vb.sb = id, sb
	if r := vb.s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "working"}); r.status != http.StatusOK {
		b.Fatalf("working: %d %s", r.status, r.raw)
	}
	ctx, stop := context.WithCancel(context.Background())
	b.Cleanup(stop)
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				vb.s.call(http.MethodPost, "/sandbox/"+id+"/heartbeat", sb, map[string]any{"busy": true})
			}
		}
	}()
	for range others {
		v := vb.s.watch(b, id, tok, 0)
		v.next("sync")
		go v.drain(vb)
	}
	vb.tab = browser(b)
	inBrowser(b, vb.tab, 20*time.Second,
		chromedp.Navigate(vb.s.srv.URL+"/embed/"+id+"?token="+tok),
		voidPoll(`document.getElementById("app").dataset.connection === "open"`, 15*time.Second),
	)
	value(b, vb.tab, chromedp.Evaluate[bool](`window.__recv = {}; window.__live = {};
addEventListener("remote-agent:event", (e) => { window.__recv[e.detail.id] = performance.timeOrigin + performance.now(); });
addEventListener("remote-agent:live", (e) => { if (e.detail.data && e.detail.data.text) window.__live[e.detail.data.text] = performance.timeOrigin + performance.now(); });
true`))
	return vb
}

// arrival waits for the page to have recorded expr's time, and returns it.
func (vb *viewerBench) arrival(expr string) float64 {
	inBrowser(vb.b, vb.tab, 10*time.Second, voidPoll(expr+` !== undefined`, 10*time.Second))
	return value(vb.b, vb.tab, chromedp.Evaluate[float64](expr))
}

// append appends an event as the sandbox does and returns how long it took
// to reach the page from being stored, and from the request.
func (vb *viewerBench) append() (stored, posted float64) {
	sent := benchNow()
	r := vb.s.call(http.MethodPost, "/sandbox/"+vb.id+"/events", vb.sb, map[string]any{"events": []any{map[string]any{"type": "tool.call", "data": map[string]any{"tool": "bash", "args": "{}", "output": "tick"}}}})
	if r.status != http.StatusOK {
		vb.b.Fatalf("append: %d %s", r.status, r.raw)
	}
	seq := int64(r.body["first_seq"].(float64))
	at := vb.arrival(fmt.Sprintf(`window.__recv[%d]`, seq))
	vb.mu.Lock()
	defer vb.mu.Unlock()
	vb.last = seq
	return at - vb.stored[seq], at - sent
}

// socket is how long the last event appended took from being stored to the
// first WebSocket viewer (not a browser); it waits for drain's word.
func (vb *viewerBench) socket() float64 {
	expired := false
	timer := time.AfterFunc(10*time.Second, func() {
		vb.mu.Lock()
		expired = true
		vb.mu.Unlock()
		vb.arrived.Broadcast()
	})
	defer timer.Stop()
	vb.mu.Lock()
	defer vb.mu.Unlock()
	for {
		if at, ok := vb.got[vb.last]; ok {
			return at - vb.stored[vb.last]
		}
		if expired {
			vb.b.Fatalf("event %d did not reach the WebSocket viewer within 10 s", vb.last)
		}
		vb.arrived.Wait()
	}
}

// delta posts a piece of a reply as the sandbox does and returns how long
// it took to reach the page.
func (vb *viewerBench) delta(i int) float64 {
	text := fmt.Sprintf("piece-%d ", i)
	sent := benchNow()
	r := vb.s.call(http.MethodPost, "/sandbox/"+vb.id+"/deltas", vb.sb, map[string]any{"deltas": []any{map[string]any{"type": "agent.message.delta",
		"data": map[string]any{"message_id": "bench", "offset": vb.offset, "text": text}}}})
	if r.status != http.StatusOK {
		vb.b.Fatalf("deltas: %d %s", r.status, r.raw)
	}
	vb.offset += len(text)
	return vb.arrival(fmt.Sprintf(`window.__live[%q]`, text)) - sent
}

// drain reads the viewer's frames until its connection closes, noting
// when each event came.
func (v *viewer) drain(vb *viewerBench) {
	for {
		_, raw, err := v.c.Read(context.Background())
		if err != nil {
			return
		}
		at := benchNow()
		var f struct {
			Events []struct {
				Seq int64 `json:"seq"`
			} `json:"events"`
		}
		if json.Unmarshal(raw, &f) != nil {
			continue
		}
		vb.mu.Lock()
		for _, e := range f.Events {
			if _, seen := vb.got[e.Seq]; !seen && e.Seq > 0 {
				vb.got[e.Seq] = at
			}
		}
		vb.mu.Unlock()
		vb.arrived.Broadcast()
	}
}
