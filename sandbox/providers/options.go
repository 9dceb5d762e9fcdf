package providers

import (
	"context"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// Options configure a provider adapter.
type Options struct {
	// APIKey authenticates the calls; "" sends none (a local server).
	APIKey string
	// BaseURL is the endpoint; "" is the provider's public API.
	BaseURL string
	// Model is the model of a request that names none: a canonical ID
	// (ProviderModelID) or the provider's own.
	Model string
	// MaxTokens bounds a reply when a request sets no bound.
	MaxTokens int
	// Temperature is sent with every request; nil sends none, leaving the
	// model's default.
	Temperature *float64
	// Timeout bounds one model call; MaxRetries is how often a call answered
	// 429 or 5xx is tried again.
	Timeout    time.Duration
	MaxRetries int
}

// fallbackMaxTokens bounds a reply when neither the request nor the options
// do, for the APIs that require a bound (Anthropic's).
const fallbackMaxTokens = 4096

// model is req's model, else the configured one, as provider names it.
func (o Options) model(provider string, req llm.Request) string {
	model := req.Model
	if model == "" {
		model = o.Model
	}
	return ProviderModelID(provider, model)
}

// maxTokens is req's bound, else the configured one; 0: none.
func (o Options) maxTokens(req llm.Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return max(o.MaxTokens, 0)
}

// withTimeout bounds ctx by the configured timeout, if any.
func (o Options) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, o.Timeout)
}
