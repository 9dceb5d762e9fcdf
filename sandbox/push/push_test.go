package push

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// TestHoldReconnects: Hold connects with the peer's query parameter and
// bearer, passes the frames that parse, and when the connection ends says so
// and connects again after the shortest backoff (a connect that succeeded
// resets it); a refused connect doubles the next wait.
func TestHoldReconnects(t *testing.T) {
	var (
		mu      sync.Mutex
		accepts int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get(sandboxwire.PushSessionParam) != "s1" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "refused", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		accepts++
		n := accepts
		mu.Unlock()
		if n == 2 {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		_ = c.Write(r.Context(), websocket.MessageText, []byte("not json"))
		_ = c.Write(r.Context(), websocket.MessageText, []byte(`{"type":"inbox"}`))
		if n == 1 {
			_ = c.Close(websocket.StatusNormalClosure, "bye") // the first connection ends
			return
		}
		_, _, _ = c.Read(context.Background()) // held until the sandbox closes it
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var (
		frames, connects int
		waits            []time.Duration
	)
	held := make(chan struct{})
	go func() {
		defer close(held)
		Hold(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/push", Peer{
			Param: sandboxwire.PushSessionParam, ID: "s1", Bearer: "tok",
			Connected: func() { connects++ },
			Frame: func(f sandboxwire.Push) {
				if f.Type == sandboxwire.PushInbox {
					frames++
				}
				if frames == 2 {
					cancel() // the second connection brought its frame
				}
			},
			Down: func(err error, retryIn time.Duration) { waits = append(waits, retryIn) },
		}, slog.New(slog.DiscardHandler))
	}()
	<-held
	if connects != 2 || frames != 2 {
		t.Errorf("%d connects, %d inbox frames; want 2 and 2", connects, frames)
	}
	if len(waits) != 2 || waits[0] != retryMin || waits[1] != 2*retryMin {
		t.Errorf("waits %v: want %v after the connection that ended, then %v after the refused connect", waits, retryMin, 2*retryMin)
	}
}
