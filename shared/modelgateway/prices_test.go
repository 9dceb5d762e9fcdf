package modelgateway_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/data"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/session"
)

func TestCostFromThePriceTable(t *testing.T) {
	p, err := modelgateway.ParsePrices(data.ModelPrices)
	if err != nil {
		t.Fatal(err)
	}
	// 1,000 input tokens of which 200 cached, 500 output, at 3 / 0.3 / 15
	// USD per million: 800×3 + 200×0.3 + 500×15 = 9,960 micro-USD.
	u := session.Usage{InputTokens: 1000, CachedTokens: 200, OutputTokens: 500}
	if got := p.Cost("claude-sonnet-4-5-20250929", u); got != 9960 {
		t.Errorf("cost %d micro-USD, want 9960", got)
	}
	if got := p.Cost("gpt-4o-mini-2024", session.Usage{InputTokens: 1000000}); got != 150000 {
		t.Errorf("the longest prefix: %d, want 150000 (gpt-4o-mini, not gpt-4o)", got)
	}
	if got := p.Cost("unknown-model", u); got != 0 {
		t.Errorf("an unlisted model: %d", got)
	}
	if _, err := modelgateway.ParsePrices([]byte(`{"models":{"m":{"input":-1}}}`)); err == nil {
		t.Error("a negative price was taken")
	}
}
