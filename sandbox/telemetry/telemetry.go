// Package telemetry exports what an agent does: every LLM message (with session,
// workflow, goal, agent, tokens, latency, model, iteration) and its logs, to an HTTP
// endpoint (batched, retried), to a JSON-lines file per session, or nowhere.
package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/retry"
)

// Record is one exported item: a message or a log line.
type Record struct {
	Kind         string         `json:"kind"` // "message" or "log"
	Time         time.Time      `json:"time"`
	SessionID    string         `json:"session_id"`
	Workflow     string         `json:"workflow_name,omitempty"`
	Goal         string         `json:"goal,omitempty"`
	Agent        string         `json:"agent,omitempty"`
	Role         string         `json:"role,omitempty"`
	Content      string         `json:"content,omitempty"`
	InputTokens  int            `json:"input_tokens,omitempty"`
	OutputTokens int            `json:"output_tokens,omitempty"`
	LatencyMS    float64        `json:"latency_ms,omitempty"`
	Model        string         `json:"model,omitempty"`
	Iteration    int            `json:"iteration,omitempty"`
	Level        string         `json:"level,omitempty"`
	Fields       map[string]any `json:"fields,omitempty"`
}

// Exporter sends records somewhere. Export never blocks on the network for long;
// Close flushes what is pending.
type Exporter interface {
	Export(r Record)
	Close(ctx context.Context) error
}

// New returns the exporter of protocol: http (endpoint is the URL), otlp (the
// collector's OTLP/HTTP logs URL), file (endpoint is the folder), or noop.
func New(protocol, endpoint, sessionID string) (Exporter, error) {
	switch protocol {
	case "", "noop":
		return Noop{}, nil
	case "http":
		if endpoint == "" {
			return nil, errors.New("telemetry: http needs an endpoint")
		}
		return NewHTTP(endpoint, HTTPOptions{}), nil
	case "file":
		return NewFile(endpoint, sessionID)
	case "otlp":
		if endpoint == "" {
			return nil, errors.New("telemetry: otlp needs an endpoint")
		}
		return NewOTLP(context.Background(), endpoint)
	default:
		return nil, fmt.Errorf("telemetry: protocol %q is not available (http, otlp, file, noop)", protocol)
	}
}

// Noop discards everything.
type Noop struct{}

// Export discards r.
func (Noop) Export(Record) {}

// Close does nothing.
func (Noop) Close(context.Context) error { return nil }

// File writes JSON lines to <dir>/<session>.jsonl.
type File struct {
	mu  sync.Mutex
	f   *os.File
	enc *json.Encoder
}

// NewFile opens the session's file for appending.
func NewFile(dir, sessionID string) (*File, error) {
	if dir == "" {
		dir = "."
	}
	if sessionID == "" || filepath.Base(sessionID) != sessionID || sessionID == ".." {
		return nil, fmt.Errorf("telemetry: invalid session id %q", sessionID)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, sessionID+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	return &File{f: f, enc: json.NewEncoder(f)}, nil
}

// Export appends r.
func (x *File) Export(r Record) {
	x.mu.Lock()
	defer x.mu.Unlock()
	_ = x.enc.Encode(r)
}

// Close closes the file.
func (x *File) Close(context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.f.Close()
}

// HTTPOptions tune the HTTP exporter.
type HTTPOptions struct {
	BatchSize     int           // default 50
	FlushInterval time.Duration // default 2 s
	MaxRetries    int           // default 3
	MaxBuffered   int           // default 10,000: beyond, records are dropped and counted
	Client        *http.Client
	Token         string // sent as a bearer token when set
}

// HTTP posts batches of records as a JSON array to an endpoint, retrying failed
// posts with backoff. It never grows without bound: past MaxBuffered, records are
// dropped and counted.
type HTTP struct {
	url     string
	o       HTTPOptions
	mu      sync.Mutex
	buf     []Record
	dropped int
	kick    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

// NewHTTP starts an HTTP exporter.
func NewHTTP(url string, o HTTPOptions) *HTTP {
	if o.BatchSize <= 0 {
		o.BatchSize = 50
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 2 * time.Second
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 3
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = 10000
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	h := &HTTP{url: url, o: o, kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go h.loop()
	return h
}

// Export queues r.
func (h *HTTP) Export(r Record) {
	h.mu.Lock()
	if len(h.buf) >= h.o.MaxBuffered {
		h.dropped++
		h.mu.Unlock()
		return
	}
	h.buf = append(h.buf, r)
	full := len(h.buf) >= h.o.BatchSize
	h.mu.Unlock()
	if full {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// Dropped returns how many records were dropped for lack of room.
func (h *HTTP) Dropped() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropped
}

func (h *HTTP) loop() {
	defer close(h.stopped)
	tick := time.NewTicker(h.o.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-h.done:
			h.flush(context.Background())
			return
		case <-tick.C:
		case <-h.kick:
		}
		h.flush(context.Background())
	}
}

// flush sends everything buffered, batch by batch; a batch that fails after its
// retries is put back for the next flush.
func (h *HTTP) flush(ctx context.Context) {
	for {
		h.mu.Lock()
		n := min(len(h.buf), h.o.BatchSize)
		batch := append([]Record(nil), h.buf[:n]...)
		h.buf = h.buf[n:]
		h.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		if err := h.post(ctx, batch); err != nil {
			h.mu.Lock()
			h.buf = append(batch, h.buf...)
			h.mu.Unlock()
			return
		}
	}
}

func (h *HTTP) post(ctx context.Context, batch []Record) error {
	body, err := json.Marshal(batch)
	if err != nil {
		return err
	}
	_, err = retry.Do(ctx, retry.Policy{Retries: h.o.MaxRetries, Initial: 200 * time.Millisecond}, func() (struct{}, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
		if err != nil {
			return struct{}{}, retry.Permanent(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if h.o.Token != "" {
			req.Header.Set("Authorization", "Bearer "+h.o.Token)
		}
		res, err := h.o.Client.Do(req)
		if err != nil {
			return struct{}{}, err
		}
		_ = res.Body.Close()
		if res.StatusCode < 300 || (res.StatusCode < 500 && res.StatusCode != http.StatusTooManyRequests) {
			return struct{}{}, nil // taken, or refused for good: retrying would not help, dropping is
		}
		return struct{}{}, fmt.Errorf("telemetry endpoint answered %s", res.Status)
	})
	return err
}

// Close flushes and stops the exporter.
func (h *HTTP) Close(ctx context.Context) error {
	close(h.done)
	select {
	case <-h.stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.buf) > 0 {
		return fmt.Errorf("telemetry: %d records could not be delivered", len(h.buf))
	}
	return nil
}
