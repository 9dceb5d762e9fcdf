package systemtest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
)

// BenchmarkWorkspaceTool measures a workspace read round trip on the local
// stack: the app's POST through the dev gateway, the request appended to the
// agent's inbox, the real sandbox reading it (its inbox poll, one second
// apart), running read through its tool registry and posting the result,
// and the route's wait on the result record. Run with -benchtime=20x for
// percentiles over 20 reads.
func BenchmarkWorkspaceTool(b *testing.B) {
	s := start(b, withSandboxEnv("RA_NO_TMUX=1"))
	s.putType(b, "bench", map[string]any{"enabled": true, "tools": []string{"read"}})
	id, tok := s.createTyped(b, "bench")
	body := map[string]any{"args": map[string]any{"path": "conversation.json", "limit": 1}}
	rec := benchrec.New(b)
	for b.Loop() {
		began := time.Now()
		r := s.runTool(id, tok, "read", body)
		rec.Add("read", time.Since(began))
		if r.status != http.StatusOK || r.body["is_error"] != false {
			b.Fatalf("read: %d %s", r.status, r.raw)
		}
	}
	b.StopTimer()
	rec.Done()
}
