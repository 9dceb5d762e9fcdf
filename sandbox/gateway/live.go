package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/sandbox/retry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/sanitize"
)

// Bounds of a Live sender.
const (
	// livePostTimeout bounds one post: a live event that is late is useless,
	// so it is tried once, briefly.
	livePostTimeout = 2 * time.Second
	// liveFlushTimeout bounds Flush and Close.
	liveFlushTimeout = 5 * time.Second
	// liveQueue bounds the events queued while a post is in flight.
	liveQueue = 256
)

// Live sends a session's live events (sandboxwire.LiveTypes) as they come,
// without ever holding up their sender: Send queues, and one goroutine posts
// (POST RouteDeltas) everything queued in one request while the next events
// queue behind it. So a fast platform gets each event at once and a slow one
// bigger batches, in order. A post is tried once, within a couple of
// seconds; what fails is logged and dropped, since live events are
// ephemeral (the stored agent.message and tool.call follow them).
type Live struct {
	cl     *Client
	log    *slog.Logger
	wake   chan struct{}
	done   chan struct{}
	cancel context.CancelFunc

	mu      sync.Mutex
	queue   []queued
	waiters []chan struct{} // Flush calls waiting for the queue to be posted
	posting bool
	dropped int
	closed  bool
}

// queued is a queued live event; end is a MessageDelta's Offset plus the
// length of its Text (code points), where a next piece of it would begin.
type queued struct {
	p   sandboxwire.Payload
	end int
}

// Live starts a sender of the session's live events, which logs to log. It
// posts until Close, or until ctx ends.
func (cl *Client) Live(ctx context.Context, log *slog.Logger) *Live {
	c := *cl
	c.retry = retry.Policy{} // one attempt
	ctx, cancel := context.WithCancel(ctx)
	l := &Live{cl: &c, log: log, wake: make(chan struct{}, 1), done: make(chan struct{}), cancel: cancel}
	go l.run(ctx)
	return l
}

// Send queues p, a live event, and returns at once. A MessageDelta that
// continues the last queued one (same message, its offset where that one's
// text ends) is merged into it. When liveQueue events wait already, the
// oldest is dropped: each model reply is one merged event, so by then it
// belongs to a step long over, whose stored event (agent.message,
// tool.call) has superseded it. After Close, Send drops p.
//
// The sender hides the client's secrets in each event, as EmitAll does, but
// it cannot see a secret split across two deltas: the text of the deltas
// must be redacted as it streams (redact.Stream).
func (l *Live) Send(p sandboxwire.Payload) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	d, isDelta := p.(sandboxwire.MessageDelta)
	if n := len(l.queue); isDelta && n > 0 {
		if last, ok := l.queue[n-1].p.(sandboxwire.MessageDelta); ok && last.MessageID == d.MessageID && l.queue[n-1].end == d.Offset {
			last.Text += d.Text
			l.queue[n-1] = queued{p: last, end: d.Offset + utf8.RuneCountInString(d.Text)}
			return
		}
	}
	if len(l.queue) >= liveQueue {
		l.queue = slices.Delete(l.queue, 0, 1)
		l.dropped++
	}
	q := queued{p: p}
	if isDelta {
		q.end = d.Offset + utf8.RuneCountInString(d.Text)
	}
	l.queue = append(l.queue, q)
	l.signal()
}

// Flush waits until the events sent so far are posted (or dropped), for at
// most a few seconds: so that they reach the platform before the stored
// event that follows them.
func (l *Live) Flush() {
	l.mu.Lock()
	if l.closed || (len(l.queue) == 0 && !l.posting) {
		l.mu.Unlock()
		return
	}
	posted := make(chan struct{})
	l.waiters = append(l.waiters, posted)
	l.mu.Unlock()
	l.signal()
	t := time.NewTimer(liveFlushTimeout)
	defer t.Stop()
	select {
	case <-posted:
	case <-l.done:
	case <-t.C:
	}
}

// Close posts what is queued, for at most a few seconds, and stops the
// sender. Sending after Close drops the events.
func (l *Live) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.signal()
	t := time.NewTimer(liveFlushTimeout)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		l.cancel() // abandons the post in flight
		<-l.done
	}
	l.cancel()
}

func (l *Live) signal() {
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// run posts what is queued, batch after batch, until Close or ctx ends.
func (l *Live) run(ctx context.Context) {
	defer close(l.done)
	for {
		select {
		case <-l.wake:
		case <-ctx.Done():
			return
		}
		l.mu.Lock()
		batch, waiters, dropped, closed := l.queue, l.waiters, l.dropped, l.closed
		l.queue, l.waiters, l.dropped = nil, nil, 0
		l.posting = len(batch) > 0
		l.mu.Unlock()
		if dropped > 0 {
			l.log.Warn("live events dropped: too many waiting", slog.Int("dropped", dropped))
		}
		off := l.post(ctx, batch)
		l.mu.Lock()
		l.posting = false
		l.closed = l.closed || off
		l.mu.Unlock()
		for _, w := range waiters {
			close(w)
		}
		if closed || off {
			return
		}
	}
}

// post posts batch, in requests of at most MaxDeltasPerPost events, and
// reports whether the platform wants none (no such route, a refused token):
// then the sender stops. A failed request drops the rest of the batch.
func (l *Live) post(ctx context.Context, batch []queued) (off bool) {
	var events []sandboxwire.Event
	for _, q := range batch {
		events = append(events, l.events(q.p)...)
	}
	for chunk := range slices.Chunk(events, sandboxwire.MaxDeltasPerPost) {
		pctx, cancel := context.WithTimeout(ctx, livePostTimeout)
		var out struct{}
		err := l.cl.Do(pctx, http.MethodPost, sandboxwire.RouteDeltas, sandboxwire.DeltasRequest{Deltas: chunk}, &out)
		cancel()
		if err == nil {
			continue
		}
		status, ok := errors.AsType[*StatusError](err)
		if _, refused := errors.AsType[*AuthError](err); refused || ok && status.Status == http.StatusNotFound {
			l.log.Warn("live events not taken; not sending more", slog.String("error", err.Error()))
			return true
		}
		if ctx.Err() == nil {
			l.log.Warn("live events dropped", slog.Int("events", len(chunk)), slog.String("error", err.Error()))
		}
		return false
	}
	return false
}

// events encodes p, its secrets hidden, as events within MaxDeltaBytes: a
// delta too long is split, a tool start's arguments cut shorter; anything
// else too long, or not a live event, is dropped.
func (l *Live) events(p sandboxwire.Payload) []sandboxwire.Event {
	ev, err := sandboxwire.NewEvent(p)
	if err != nil || !slices.Contains(sandboxwire.LiveTypes, ev.Type) {
		l.log.Error("not a live event", slog.String("type", p.EventType()))
		return nil
	}
	ev.Data = l.cl.secrets.JSON(ev.Data)
	if len(ev.Data) <= sandboxwire.MaxDeltaBytes {
		return []sandboxwire.Event{ev}
	}
	// Cut, a secret would no longer be found whole: each is hidden first.
	switch p := p.(type) {
	case sandboxwire.MessageDelta:
		p.Text = l.cl.secrets.String(p.Text)
		if n := utf8.RuneCountInString(p.Text); n > 1 {
			first, rest := p, p
			first.Text, rest.Text = splitRunes(p.Text, n/2)
			rest.Offset += n / 2
			return append(l.events(first), l.events(rest)...)
		}
	case sandboxwire.ToolCallStarted:
		p.Args = string(l.cl.secrets.JSON([]byte(p.Args)))
		if n := utf8.RuneCountInString(p.Args); n > 1 {
			p.Args = sanitize.Clip(p.Args, n/2)
			return l.events(p)
		}
	}
	l.log.Warn("live event too long: dropped", slog.String("type", ev.Type), slog.Int("bytes", len(ev.Data)))
	return nil
}

// splitRunes splits s after its first n code points.
func splitRunes(s string, n int) (string, string) {
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], s[i:]
}
