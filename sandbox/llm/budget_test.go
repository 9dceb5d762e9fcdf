package llm_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// slow is a provider whose calls wait for their context.
type slow struct{ llm.Provider }

func (slow) Chat(ctx context.Context, _ llm.Request) (llm.Response, error) {
	<-ctx.Done()
	return llm.Response{}, ctx.Err()
}

// recording is a provider that keeps each call's max tokens.
type recording struct {
	llm.Provider
	maxTokens []int
}

func (r *recording) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	r.maxTokens = append(r.maxTokens, req.MaxTokens)
	return r.Provider.Chat(ctx, req)
}

// A budget smaller than a call's max tokens is spent, not refused: each
// call's max tokens is lowered to what remains after its input, and a call
// is refused, never made, only once nothing remains for a reply.
func TestBudgetClampsEachCallToWhatRemains(t *testing.T) {
	steps := []llm.ScriptStep{
		{Text: "a", Usage: &llm.Usage{InputTokens: 500, OutputTokens: 1000}},
		{Text: "b", Usage: &llm.Usage{InputTokens: 300, OutputTokens: 150}},
		{Text: "c", Usage: &llm.Usage{InputTokens: 40, OutputTokens: 9}},
	}
	inner := &recording{Provider: llm.NewScripted(steps)}
	var seen []int64
	b := &llm.Budget{Provider: inner, Limit: 2000, OnUsage: func(u int64) { seen = append(seen, u) }}
	req := llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}, MaxTokens: 1000} // about 1 token of input
	for range 3 {
		if _, err := b.Chat(t.Context(), req); err != nil {
			t.Fatalf("after %d tokens: %v", b.Used(), err)
		}
	}
	// 1000 fits 2000; 499 is what 500 left holds after the input; then 49.
	if want := []int{1000, 499, 49}; !slices.Equal(inner.maxTokens, want) {
		t.Errorf("max tokens of the calls %v, want %v", inner.maxTokens, want)
	}
	if b.Used() != 1999 || !slices.Equal(seen, []int64{1500, 1950, 1999}) {
		t.Errorf("used %d, seen %v", b.Used(), seen)
	}
	// One token left, and the input takes it: refused, never made.
	if _, err := b.Chat(t.Context(), req); !errors.Is(err, llm.ErrTokenLimit) {
		t.Errorf("a spent budget: %v", err)
	}
	if len(inner.maxTokens) != 3 {
		t.Errorf("%d calls reached the model, want 3", len(inner.maxTokens))
	}
	// No limit: no refusal, and the request as it was.
	free := &recording{Provider: llm.NewScripted(nil)}
	if _, err := (&llm.Budget{Provider: free}).Chat(t.Context(), llm.Request{MaxTokens: 1 << 20}); err != nil || free.maxTokens[0] != 1<<20 {
		t.Errorf("without a limit: %v, max tokens %v", err, free.maxTokens)
	}
}

func TestBudgetTimesCallsOut(t *testing.T) {
	b := &llm.Budget{Provider: slow{}, CallTimeout: 10 * time.Millisecond}
	if _, err := b.Chat(t.Context(), llm.Request{}); !errors.Is(err, llm.ErrCallTimeout) {
		t.Errorf("slow call: %v", err)
	}
	// A caller's own cancellation stays the caller's.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b.CallTimeout = time.Hour
	if _, err := b.Chat(ctx, llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
}

func TestBudgetCountsStreamedReplies(t *testing.T) {
	steps := []llm.ScriptStep{{Text: "streamed reply", Usage: &llm.Usage{InputTokens: 30, OutputTokens: 20}}}
	b := &llm.Budget{Provider: llm.NewScripted(steps), Limit: 1000}
	ch, err := b.Stream(t.Context(), llm.Request{MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for e := range ch {
		text += e.Text
	}
	if text != "streamed reply" || b.Used() != 50 || b.Remaining() != 950 {
		t.Errorf("text %q used %d remaining %d", text, b.Used(), b.Remaining())
	}
	// 950 remain: a stream asking for more is held to them, not refused.
	if _, err := b.Stream(t.Context(), llm.Request{MaxTokens: 5000}); err != nil {
		t.Errorf("a stream asking for more than remains: %v", err)
	}
	b.Limit = 50 // spent
	if _, err := b.Stream(t.Context(), llm.Request{MaxTokens: 10}); !errors.Is(err, llm.ErrTokenLimit) {
		t.Errorf("a stream of a spent budget: %v", err)
	}
}
