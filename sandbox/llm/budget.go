package llm

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Budget is a Provider that holds every call to a token budget and a time
// limit: it counts the tokens each reply used as it returns, and lowers each
// call's max tokens to what remains of Limit once its input (estimated from
// its text) is counted, so that a small budget is spent, not refused whole.
// It refuses a call (ErrTokenLimit, before calling) only when nothing would
// remain for its reply. Each call runs within CallTimeout.
type Budget struct {
	Provider
	// Limit is the budget of input and output tokens; 0: none.
	Limit int64
	// CallTimeout bounds one call; 0: none.
	CallTimeout time.Duration
	// OnUsage, if set, sees the total used after each call.
	OnUsage func(used int64)

	mu   sync.Mutex
	used int64
}

// Used returns the tokens the calls so far used.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Remaining returns what is left of the budget (negative once over it; 0
// when there is no limit).
func (b *Budget) Remaining() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Limit - b.used
}

// admit returns req with its max tokens at most what remains of the budget
// after its input, or ErrTokenLimit when no room for a reply remains.
func (b *Budget) admit(req Request) (Request, error) {
	if b.Limit <= 0 {
		return req, nil
	}
	input := int64(estimateTokens(req))
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.Limit - b.used - input
	if room < 1 {
		return req, fmt.Errorf("%w: %d of %d tokens used, and the next call's input is about %d more", ErrTokenLimit, b.used, b.Limit, input)
	}
	if req.MaxTokens <= 0 || int64(req.MaxTokens) > room {
		req.MaxTokens = int(room)
	}
	return req, nil
}

func (b *Budget) count(u Usage) {
	b.mu.Lock()
	b.used += int64(u.InputTokens + u.OutputTokens)
	used := b.used
	b.mu.Unlock()
	if b.OnUsage != nil {
		b.OnUsage(used)
	}
}

func (b *Budget) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.CallTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, b.CallTimeout, fmt.Errorf("%w: the model call took longer than %s", ErrCallTimeout, b.CallTimeout))
}

// ErrCallTimeout is a model call that took longer than Budget.CallTimeout.
var ErrCallTimeout = fmt.Errorf("model call timed out")

// Chat makes the call, its max tokens within what remains, if any remains,
// and counts what it used. A refused call is ErrTokenLimit; one past
// CallTimeout ErrCallTimeout.
func (b *Budget) Chat(ctx context.Context, req Request) (Response, error) {
	req, err := b.admit(req)
	if err != nil {
		return Response{}, err
	}
	cctx, cancel := b.callContext(ctx)
	defer cancel()
	res, err := b.Provider.Chat(cctx, req)
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return res, context.Cause(cctx)
		}
		return res, err
	}
	b.count(res.Usage)
	return res, nil
}

// Stream makes the call if the budget allows it and counts what the reply
// used when it is done.
func (b *Budget) Stream(ctx context.Context, req Request) (<-chan Event, error) {
	req, err := b.admit(req)
	if err != nil {
		return nil, err
	}
	cctx, cancel := b.callContext(ctx)
	in, err := b.Provider.Stream(cctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan Event, 16)
	go func() {
		defer cancel()
		defer close(out)
		for e := range in {
			if e.Type == Done && e.Response != nil {
				b.count(e.Response.Usage)
			}
			select {
			case out <- e:
			case <-ctx.Done(): // the caller gave up: drain, never block
			}
		}
	}()
	return out, nil
}
