package systemtest_test

import (
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
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
	rec := benchrec.New(b)
	i := 0
	for b.Loop() {
		var whole, first [2]time.Duration
		for _, k := range []int{i % 2, 1 - i%2} {
			whole[k], first[k] = stream(clients[k])
		}
		i++
		rec.Add("direct", whole[0])
		rec.Add("gateway", whole[1])
		rec.Add("added", whole[1]-whole[0])
		rec.Add("added-first-text", first[1]-first[0])
	}
	rec.Figure("gateway/direct", rec.Percentile("gateway", 0.5)/rec.Percentile("direct", 0.5))
	rec.Done()
}
