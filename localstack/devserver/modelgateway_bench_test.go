package devserver_test

import (
	"slices"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/providers/providertest"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// BenchmarkModelGateway measures what the model gateway adds to a streamed
// model call. Each iteration streams the same reply from a local server of
// Anthropic's wire format twice with the Anthropic SDK, in turn first:
// directly, and through the dev server's model route (the sandbox token
// checked, the platform's key put in, the answer relayed as it comes and its
// usage added to the session in DynamoDB). It reports the medians of both,
// the p50 and p95 of the latency added (through the gateway less directly,
// iteration by iteration) to the whole stream and to its first text, and the
// ratio of the medians. make bench runs it over 200 calls (-benchtime 200x).
func BenchmarkModelGateway(b *testing.B) {
	wire := providertest.NewServer(b, providertest.Anthropic(b))
	wire.Reply()
	s := start(b, withModels(map[string]string{"anthropic": wire.URL}, nil))
	id, _, sb := s.storedAgent(b)
	o := providers.Options{Model: "claude-sonnet-4.5", MaxTokens: 64, Timeout: 30 * time.Second}
	direct, through := o, o
	direct.BaseURL, direct.APIKey = wire.URL, "test-key"
	through.BaseURL, through.APIKey = sandboxwire.ModelBaseURL(s.srv.URL, id, "anthropic"), sb
	clients := [2]llm.Provider{providers.NewAnthropic(direct), providers.NewAnthropic(through)}
	req := llm.Request{System: "be brief", Messages: []llm.Message{{Role: llm.User, Content: "hello"}}, Tools: []llm.Tool{providertest.ReadTool}}
	// stream returns how long the whole stream took and its first text.
	stream := func(p llm.Provider) (whole, first time.Duration) {
		began := time.Now()
		ch, err := p.Stream(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		for e := range ch {
			switch {
			case e.Type == llm.TextDelta && first == 0:
				first = time.Since(began)
			case e.Type == llm.Failed:
				b.Fatal(e.Err)
			case e.Type == llm.Done && e.Response.Content != "Hello there.":
				b.Fatalf("reply %q", e.Response.Content)
			}
		}
		return time.Since(began), first
	}
	for _, c := range clients { // connections and the session warm
		stream(c)
	}
	var directs, gateways, added, addedFirst []time.Duration
	i := 0
	for b.Loop() {
		var whole, first [2]time.Duration
		for _, k := range []int{i % 2, 1 - i%2} {
			whole[k], first[k] = stream(clients[k])
		}
		i++
		directs, gateways = append(directs, whole[0]), append(gateways, whole[1])
		added, addedFirst = append(added, whole[1]-whole[0]), append(addedFirst, first[1]-first[0])
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pct := func(ds []time.Duration, p float64) time.Duration {
		ds = slices.Sorted(slices.Values(ds))
		return ds[int(p*float64(len(ds)-1))]
	}
	b.ReportMetric(ms(pct(directs, 0.50)), "direct-p50-ms")
	b.ReportMetric(ms(pct(gateways, 0.50)), "gateway-p50-ms")
	b.ReportMetric(ms(pct(added, 0.50)), "added-p50-ms")
	b.ReportMetric(ms(pct(added, 0.95)), "added-p95-ms")
	b.ReportMetric(ms(pct(addedFirst, 0.50)), "added-first-text-p50-ms")
	b.ReportMetric(ms(pct(addedFirst, 0.95)), "added-first-text-p95-ms")
	b.ReportMetric(float64(pct(gateways, 0.50))/float64(pct(directs, 0.50)), "ratio-p50")
}
