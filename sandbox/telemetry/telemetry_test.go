package telemetry_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/telemetry"
)

func TestHTTPBatchesAndRetries(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var batches [][]telemetry.Record
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // the first post fails: it must be retried
			return
		}
		var b []telemetry.Record
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("post: %v, auth %q", err, r.Header.Get("Authorization"))
		}
		batches = append(batches, b)
	}))
	defer srv.Close()
	h := telemetry.NewHTTP(srv.URL, telemetry.HTTPOptions{BatchSize: 10, FlushInterval: time.Hour, Token: "tok"})
	for i := range 25 {
		h.Export(telemetry.Record{Kind: "message", SessionID: "s", Goal: "g", Role: "assistant", InputTokens: i, OutputTokens: 1, LatencyMS: 12.5, Model: "m", Iteration: 2})
	}
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, b := range batches {
		if len(b) > 10 {
			t.Errorf("batch of %d, limit 10", len(b))
		}
		total += len(b)
	}
	if total != 25 || batches[0][0].SessionID != "s" || batches[0][0].Model != "m" || batches[0][0].Iteration != 2 {
		t.Errorf("delivered %d records in %d batches: %+v", total, len(batches), batches)
	}
}

func TestHTTPBoundsItsBuffer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer srv.Close()
	h := telemetry.NewHTTP(srv.URL, telemetry.HTTPOptions{BatchSize: 1000, FlushInterval: time.Hour, MaxBuffered: 5, MaxRetries: 1})
	for range 8 {
		h.Export(telemetry.Record{Kind: "log"})
	}
	if h.Dropped() != 3 {
		t.Errorf("dropped %d, want 3", h.Dropped())
	}
	if err := h.Close(t.Context()); err == nil {
		t.Error("undeliverable records not reported on close")
	}
}

func TestFileWritesJSONLinesPerSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := telemetry.New("file", dir, "abc123")
	if err != nil {
		t.Fatal(err)
	}
	f.Export(telemetry.Record{Kind: "message", SessionID: "abc123", Content: "hi"})
	f.Export(telemetry.Record{Kind: "log", Level: "info", Fields: map[string]any{"k": "v"}})
	if err := f.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(filepath.Join(dir, "abc123.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = file.Close() }()
	sc := bufio.NewScanner(file)
	n := 0
	for sc.Scan() {
		var r telemetry.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d lines", n)
	}
	if _, err := telemetry.New("file", dir, "../escape"); err == nil {
		t.Error("session id with a path accepted")
	}
	if x, err := telemetry.New("noop", "", ""); err != nil || x.Close(t.Context()) != nil {
		t.Errorf("noop: %v", err)
	}
	if _, err := telemetry.New("carrier-pigeon", "", ""); err == nil {
		t.Error("unknown protocol accepted")
	}
}
