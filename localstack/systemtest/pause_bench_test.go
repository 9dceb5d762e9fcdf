package systemtest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
)

// BenchmarkPauseResume measures pause (until the agent is paused: its
// turn stopped, its checkpoint written, verified and committed) and resume
// (until it is ready again from that checkpoint), each on a new agent per
// iteration whose workspace was just filled with random bytes, so that the
// checkpoint uploads all of it:
//   - 10 MB: pause, resume on a cold sandbox (a type with no pool) and
//     resume on a warm one (a type with a pool of 1, refilled off the
//     clock);
//   - large (1 GB; RA_BENCH_CHECKPOINT_LARGE_MB): pause, resume, and a
//     second pause of the same, unchanged workspace, which uploads only
//     its manifest.
//
// Each agent is killed once measured, which deletes its checkpoints.
func BenchmarkPauseResume(b *testing.B) {
	s := start(b, withSandboxEnv("RA_NO_TMUX=1"), withoutRefillOnClaim())
	for _, typ := range []struct {
		id   string
		pool int
	}{{"ckpt-cold", 0}, {"ckpt-warm", 1}} {
		ws := map[string]any{"enabled": true, "repo_source": map[string]any{"type": "none"}, "warm_pool_size": typ.pool, "tools": []string{"bash"}}
		if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": typ.id, "name": typ.id, "workspace_config": ws}); r.status != http.StatusCreated {
			b.Fatalf("create type %s: %d %s", typ.id, r.status, r.raw)
		}
	}
	s.sweep()
	s.waitIdle("ckpt-warm", 1)
	large := envInt("RA_BENCH_CHECKPOINT_LARGE_MB", 1024)
	largeName := fmt.Sprintf("%d MB", large)
	if large == 1024 {
		largeName = "1 GB"
	}
	rec := benchrec.New(b)
	// agent creates an agent of typ with mb MB of random bytes in its
	// workspace, its first turn answered, off the clock.
	agent := func(typ string, mb int) (string, string) {
		b.StopTimer()
		defer b.StartTimer()
		body := createBody("Hello")
		body["agent_type"] = typ
		r := s.create(body)
		if r.status != http.StatusOK {
			b.Fatalf("create: %d %s", r.status, r.raw)
		}
		id, tok := r.str("agent_id"), r.str("session_token")
		s.waitAgentMessages(b, id, tok, 1)
		s.bash(b, id, tok, fmt.Sprintf("head -c %d /dev/urandom > data.bin", mb<<20))
		return id, tok
	}
	// timed makes the call and records how long it took under series.
	timed := func(series, path, tok, want string) reply {
		began := time.Now()
		r := s.call(http.MethodPost, path, tok, nil)
		took := time.Since(began)
		if r.status != http.StatusOK || (want != "" && r.str("state") != want) {
			b.Fatalf("%s: %d %s", series, r.status, r.raw)
		}
		rec.Add(series, took)
		return r
	}
	kill := func(id string) {
		b.StopTimer()
		defer b.StartTimer()
		if k := s.call(http.MethodPost, "/api/remote_agents/"+id+"/kill", appKey, nil); k.status != http.StatusOK {
			b.Fatalf("kill: %d %s", k.status, k.raw)
		}
	}
	path := func(id, verb string) string { return "/api/remote_agents/" + id + "/" + verb }
	for b.Loop() {
		id, tok := agent("ckpt-cold", 10)
		timed("pause 10 MB", path(id, "pause"), tok, "paused")
		timed("resume 10 MB, cold", path(id, "resume"), tok, "")
		kill(id)

		id, tok = agent("ckpt-warm", 10)
		b.StopTimer()
		s.sweep()
		s.waitIdle("ckpt-warm", 1)
		b.StartTimer()
		timed("pause 10 MB (warm type)", path(id, "pause"), tok, "paused")
		timed("resume 10 MB, warm", path(id, "resume"), tok, "")
		if a := s.alive(id, tok); a.body["from_pool"] != true {
			b.Fatalf("the warm resume did not claim the pool's sandbox: %s", a.raw)
		}
		kill(id)
		b.StopTimer()
		s.sweep()
		s.waitIdle("ckpt-warm", 1)
		b.StartTimer()

		id, tok = agent("ckpt-cold", large)
		timed("pause "+largeName, path(id, "pause"), tok, "paused")
		timed("resume "+largeName, path(id, "resume"), tok, "")
		timed("pause "+largeName+" again, unchanged", path(id, "pause"), tok, "paused")
		kill(id)
	}
	b.StopTimer()
	rec.Figure("resume warm/cold (10 MB, p50)", rec.Percentile("resume 10 MB, warm", 0.5)/rec.Percentile("resume 10 MB, cold", 0.5))
	rec.Figure("unchanged/first pause ("+largeName+", p50)", rec.Percentile("pause "+largeName+" again, unchanged", 0.5)/rec.Percentile("pause "+largeName, 0.5))
	rec.Done()
}
