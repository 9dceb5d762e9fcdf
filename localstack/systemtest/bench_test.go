package systemtest_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/sandbox/provision/gitserve"
)

// BenchmarkCreateReady measures create → ready on the local stack with process
// sandboxes, one create per iteration; run with -benchtime=50x (make bench) for
// percentiles over 50 creates. Each agent is shut down once measured, so the
// figure is create → ready, not the load of many idle agents polling.
// RA_BENCH_NO_TMUX=1 measures sandboxes started without their tmux session.
func BenchmarkCreateReady(b *testing.B) {
	var opts []option
	if os.Getenv("RA_BENCH_NO_TMUX") != "" {
		opts = append(opts, withSandboxEnv("RA_NO_TMUX=1")) // measure without the tmux session
	}
	s := start(b, opts...)
	rec := benchrec.New(b)
	for b.Loop() {
		began := time.Now()
		r := s.create(createBody("Hello"))
		rec.Add("create", time.Since(began))
		if r.status != http.StatusOK {
			b.Fatalf("create: %d %s", r.status, r.raw)
		}
		b.StopTimer()
		s.shutdown(r.str("agent_id"), r.str("session_token"))
		b.StartTimer()
	}
	rec.Done()
}

// BenchmarkCreateReadyWorkspace measures create → ready for the issue's
// three workspaces: none (an empty one), a small repository served over
// HTTP on loopback, and that repository with one setup command. Run with
// -benchtime=20x for p50 over 20 creates each.
func BenchmarkCreateReadyWorkspace(b *testing.B) {
	repo := gitserve.Serve(b, "small", []string{"main"}, map[string]map[string]string{"main": {"README.md": "small\n", "src/a.txt": "a\n"}})
	for _, c := range []struct {
		name string
		ws   map[string]any
	}{
		{"none", map[string]any{"enabled": true, "repo_source": map[string]any{"type": "none"}}},
		{"repository", map[string]any{"enabled": true, "repo_source": map[string]any{"type": "fixed", "url": repo.URL}}},
		{"repository+setup", map[string]any{"enabled": true, "repo_source": map[string]any{"type": "fixed", "url": repo.URL}, "setup_commands": []string{"cat src/a.txt > b.txt"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := start(b, withSandboxEnv("RA_NO_TMUX=1"))
			if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "bench", "name": "bench", "workspace_config": c.ws}); r.status != http.StatusCreated {
				b.Fatalf("type: %d %s", r.status, r.raw)
			}
			body := createBody("Hello")
			body["agent_type"] = "bench"
			rec := benchrec.New(b)
			for b.Loop() {
				began := time.Now()
				r := s.create(body)
				rec.Add("create", time.Since(began))
				if r.status != http.StatusOK || r.body["workspace"].(map[string]any)["status"] != "ready" {
					b.Fatalf("create: %d %s", r.status, r.raw)
				}
				b.StopTimer()
				s.shutdown(r.str("agent_id"), r.str("session_token"))
				b.StartTimer()
			}
			rec.Done()
		})
	}
}
