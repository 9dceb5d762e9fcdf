package modelgateway

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/remote-agents/remote-agents/shared/session"
)

// Price is a model's price in USD per million tokens: input tokens (those
// read from the prompt cache at CachedInput), output tokens.
type Price struct {
	Input       float64 `json:"input"`
	Output      float64 `json:"output"`
	CachedInput float64 `json:"cached_input"`
}

// Prices is a price table by model id; a model id takes the price of its
// longest listed prefix ("claude-sonnet-4-5-20250929" → "claude-sonnet-4").
type Prices map[string]Price

// ParsePrices reads a price table: {"models": {"<model>": {"input": …,
// "output": …, "cached_input": …}}}, every price finite and not negative.
func ParsePrices(raw []byte) (Prices, error) {
	var f struct {
		Models map[string]Price `json:"models"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	for m, p := range f.Models {
		if m == "" || p.Input < 0 || p.Output < 0 || p.CachedInput < 0 {
			return nil, fmt.Errorf("price table: model %q: prices must be 0 or more", m)
		}
	}
	return Prices(f.Models), nil
}

// Cost is what u cost with model, in micro-USD (a token at P USD per
// million tokens costs P micro-USD); 0 for a model the table does not list.
func (p Prices) Cost(model string, u session.Usage) int64 {
	price, ok := p.of(model)
	if !ok {
		return 0
	}
	cached := min(u.CachedTokens, u.InputTokens)
	usd := float64(u.InputTokens-cached)*price.Input + float64(cached)*price.CachedInput + float64(u.OutputTokens)*price.Output
	return int64(usd + 0.5)
}

func (p Prices) of(model string) (Price, bool) {
	best, found := "", false
	for m := range p {
		if strings.HasPrefix(model, m) && len(m) > len(best) {
			best, found = m, true
		}
	}
	return p[best], found
}
