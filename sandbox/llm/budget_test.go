package llm_test

import (
	"context"
	"errors"
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

func TestBudgetRefusesTheCallThatCouldExceedIt(t *testing.T) {
	steps := []llm.ScriptStep{{Text: "a", Usage: &llm.Usage{InputTokens: 500, OutputTokens: 100}}, {Text: "b", Usage: &llm.Usage{InputTokens: 1, OutputTokens: 1}}}
	inner := llm.NewScripted(steps)
	var seen []int64
	b := &llm.Budget{Provider: inner, Limit: 1000, OnUsage: func(u int64) { seen = append(seen, u) }}
	req := llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "hi"}}, MaxTokens: 300}
	if _, err := b.Chat(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if b.Used() != 600 || len(seen) != 1 || seen[0] != 600 {
		t.Errorf("used %d, seen %v", b.Used(), seen)
	}
	// 400 remain: a call of max 300 tokens and a little input fits ...
	if _, err := b.Chat(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	// ... one of max 398 and its input no longer does, and is never made.
	req.MaxTokens = 398
	if _, err := b.Chat(t.Context(), req); !errors.Is(err, llm.ErrTokenLimit) {
		t.Errorf("over the budget: %v", err)
	}
	if inner.Calls() != 2 {
		t.Errorf("%d calls reached the model, want 2", inner.Calls())
	}
	// No limit: no refusal.
	if _, err := (&llm.Budget{Provider: llm.NewScripted(nil)}).Chat(t.Context(), llm.Request{MaxTokens: 1 << 20}); err != nil {
		t.Errorf("without a limit: %v", err)
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
	if _, err := b.Stream(t.Context(), llm.Request{MaxTokens: 951}); !errors.Is(err, llm.ErrTokenLimit) {
		t.Errorf("a stream over the budget: %v", err)
	}
}
