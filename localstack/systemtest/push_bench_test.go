package systemtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/localstack/devserver"
)

// BenchmarkMessageToSandbox measures POST /messages → the sandbox having the
// message: the moment it appends the first event of the turn that answers it
// (its state.changed to working), seen as the request reaches the gateway.
// Sandboxes poll their inbox an hour apart, so every delivery is a push. Run
// with -benchtime=50x for percentiles over 50 messages.
func BenchmarkMessageToSandbox(b *testing.B) {
	working := make(chan time.Time, 16)
	watch := func(o *devserver.Options) {
		inner := o.Wrap
		o.Wrap = func(next http.Handler) http.Handler {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/sandbox/") && strings.HasSuffix(r.URL.Path, "/events") {
					at := time.Now()
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					var in struct {
						Events []struct {
							Type string         `json:"type"`
							Data map[string]any `json:"data"`
						} `json:"events"`
					}
					if json.Unmarshal(body, &in) == nil && len(in.Events) > 0 && in.Events[0].Type == "state.changed" && in.Events[0].Data["state"] == "working" {
						select {
						case working <- at:
						default:
						}
					}
				}
				next.ServeHTTP(w, r)
			})
			if inner != nil {
				return inner(h)
			}
			return h
		}
	}
	s := start(b, watch, withSandboxEnv("RA_INBOX_POLL_SECONDS=3600", "RA_NO_TMUX=1"))
	id, tok := s.mustCreate()
	s.connection(b, id, "")
	idle := func() {
		eventually(b, 20*time.Second, "agent idle", func() bool { return s.alive(id, tok).str("state") == "idle" })
	}
	<-working // the initial prompt's turn
	idle()
	rec := benchrec.New(b)
	for b.Loop() {
		began := time.Now()
		r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "ping"})
		if r.status != http.StatusOK {
			b.Fatalf("message: %d %s", r.status, r.raw)
		}
		select {
		case at := <-working:
			rec.Add("message→sandbox", at.Sub(began))
		case <-time.After(30 * time.Second):
			b.Fatal("the sandbox did not take the message")
		}
		b.StopTimer()
		idle()
		b.StartTimer()
	}
	rec.Done()
}
