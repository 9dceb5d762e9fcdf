package systemtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// TestPauseAndResumeKeepTheWorkspaceAndTheConversation: a paused agent has
// no sandbox running and is still alive; resumed, it has the same files
// byte for byte, answers what was sent while it was paused with its
// conversation from before in its context, under the same id and token. A
// second checkpoint of an unchanged workspace stores only its manifest. A
// fork is a new agent with the files, diverging on its own.
func TestPauseAndResumeKeepTheWorkspaceAndTheConversation(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	r := s.createReady(createBody("Hello"))
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id, tok := r.str("agent_id"), r.str("session_token")
	first := s.waitAgentMessages(t, id, tok, 1)
	// The 100 MB file among them.
	files := "mkdir -p data && head -c 104857600 /dev/urandom > data/big.bin && echo notes > notes.txt && chmod 750 notes.txt && ln -sf data/big.bin link"
	s.bash(t, id, tok, files)
	sums := func() string {
		return s.bash(t, id, tok, "sha256sum data/big.bin notes.txt && stat -c '%a %n' notes.txt && readlink link")
	}
	before := sums()
	// An env value submitted before the pause: the checkpoint keeps only
	// its reference, and the resumed sandbox's env file has it again.
	for _, v := range []string{"one", "two"} {
		if e := s.call(http.MethodPost, "/api/remote_agents/"+id+"/env", tok, map[string]any{"values": map[string]string{"PAUSE_TOKEN": v}}); e.status != http.StatusOK {
			t.Fatalf("submit env: %d %s", e.status, e.raw)
		}
	}

	p := s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil)
	if p.status != http.StatusOK || p.str("state") != "paused" || p.body["alive"] != true {
		t.Fatalf("pause: %d %s (sandbox log %s)", p.status, p.raw, s.sandboxLog(t, id))
	}
	cp, _ := p.body["checkpoint"].(map[string]any)
	if cp == nil || cp["reason"] != sandboxwire.CheckpointPause || cp["files"].(float64) < 3 || cp["bytes"].(float64) < 104857600 {
		t.Errorf("the pause's checkpoint: %s", p.raw)
	}
	eventually(t, 30*time.Second, "no sandbox runs for the paused agent", func() bool {
		sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
		return err == nil && !slices.Contains(s.srv.Launcher.Running(), sess.SandboxRef)
	})
	if a := s.alive(id, tok); a.str("state") != "paused" || a.body["alive"] != true {
		t.Errorf("alive while paused: %s", a.raw)
	}
	for _, q := range []string{"state=paused", "alive=true"} {
		l := s.call(http.MethodGet, "/api/remote_agents?"+q, appKey, nil)
		if !strings.Contains(l.raw, `"agent_id":"`+id+`"`) || !strings.Contains(l.raw, `"status":"paused"`) {
			t.Errorf("the fleet list (%s) while paused: %d %s", q, l.status, l.raw)
		}
	}
	if again := s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil); again.status != http.StatusOK || again.str("state") != "paused" {
		t.Errorf("a second pause: %d %s", again.status, again.raw)
	}
	if m := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "Still there?"}); m.status != http.StatusOK {
		t.Fatalf("a message while paused: %d %s", m.status, m.raw)
	}

	res := s.resumeReady(id, tok)
	if res.status != http.StatusOK || res.body["alive"] != true || !slices.Contains([]string{"ready", "working", "idle"}, res.str("state")) {
		t.Fatalf("resume: %d %s", res.status, res.raw)
	}
	evs, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, e := range evs {
		if st, _ := e.Data["state"].(string); e.Type == sandboxwire.TypeStateChanged && slices.Contains([]string{"pausing", "paused", "resuming"}, st) {
			states = append(states, st)
		}
	}
	if !slices.Equal(states, []string{"pausing", "paused", "resuming"}) {
		t.Errorf("the stream says %v of the pause and resume, want pausing, paused, resuming", states)
	}
	if after := sums(); after != before {
		t.Errorf("after the resume the files are\n%s\nwere\n%s", after, before)
	}
	var env map[string]string
	if raw, err := os.ReadFile(filepath.Join(s.work, "sandboxes", id+"-2.tmp", ".proliferate_env.json")); err != nil || json.Unmarshal(raw, &env) != nil || env["PAUSE_TOKEN"] != "two" {
		t.Errorf("the resumed sandbox's env file: %s, %v; want the value submitted last before the pause", raw, err)
	}
	// The message sent while paused is answered, its context the whole
	// conversation from before the pause.
	// (The env submissions had answers of their own.)
	var answer agentMessage
	eventually(t, 60*time.Second, "the answer to the message sent while paused", func() bool {
		for _, m := range s.waitAgentMessages(t, id, tok, 0) {
			if strings.Contains(m.text, "Still there?") {
				answer = m
				return true
			}
		}
		return false
	})
	if answer.context <= first[0].context {
		t.Errorf("after the resume the agent answered %q with %v tokens of context; before, %v", answer.text, answer.context, first[0].context)
	}

	// Paused again, unchanged: only the manifest is new.
	p2 := s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil)
	cp2, _ := p2.body["checkpoint"].(map[string]any)
	if p2.status != http.StatusOK || cp2 == nil || cp2["new_bytes"].(float64) > cp2["manifest"].(map[string]any)["size"].(float64)+64<<10 {
		t.Errorf("a second pause: %d %s", p2.status, p2.raw)
	}
	// A fork of the paused agent: a new agent with its files, diverging on
	// its own; the source untouched.
	// One not ready in time (a loaded machine) is a 408 with its id and
	// token: it is waited for as the documented client does.
	f := s.call(http.MethodPost, "/api/remote_agents/"+id+"/fork", appKey, nil)
	forkID, forkTok := f.str("agent_id"), f.str("session_token")
	if details, _ := f.body["details"].(map[string]any); f.status == http.StatusRequestTimeout && details != nil {
		forkID, _ = details["agent_id"].(string)
		forkTok, _ = details["session_token"].(string)
		eventually(t, 60*time.Second, "the fork ready", func() bool { st := s.alive(forkID, forkTok).str("state"); return st == "ready" || st == "idle" })
	} else if f.status != http.StatusOK || f.str("status") != "ready" {
		t.Fatalf("fork: %d %s", f.status, f.raw)
	}
	if forkID == "" || forkID == id || forkTok == "" {
		t.Fatalf("fork: %d %s", f.status, f.raw)
	}
	// The fork's own stream records its life as a create's does: created
	// (resuming from its source's checkpoint), then ready.
	if evs, err := s.srv.Env.SessionStore().Events(t.Context(), forkID, 0, 2); err != nil || len(evs) != 2 ||
		evs[0].Type != "agent.created" || evs[0].Data["state"] != "resuming" || evs[1].Type != "agent.ready" {
		t.Errorf("the fork's stream begins %+v, %v; want agent.created (resuming), agent.ready", evs, err)
	}
	if got := s.bash(t, forkID, forkTok, "sha256sum data/big.bin notes.txt && stat -c '%a %n' notes.txt && readlink link"); got != before {
		t.Errorf("the fork's files are\n%s\nwant\n%s", got, before)
	}
	s.bash(t, forkID, forkTok, "echo fork > only-in-fork.txt")
	if a := s.alive(id, tok); a.str("state") != "paused" {
		t.Errorf("the source after the fork: %s", a.raw)
	}
	list := s.call(http.MethodGet, "/api/remote_agents/"+id+"/checkpoints", appKey, nil)
	if items, _ := list.body["checkpoints"].([]any); list.status != http.StatusOK || len(items) != 2 {
		t.Errorf("checkpoints: %d %s", list.status, list.raw)
	}
	if bad := s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", "rs_"+strings.Repeat("x", 40), nil); bad.status != http.StatusUnauthorized && bad.status != http.StatusNotFound {
		t.Errorf("a pause with another token: %d %s", bad.status, bad.raw)
	}
	if bad := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, map[string]any{"checkpoint_id": "cp_nope"}); bad.status != http.StatusNotFound || bad.str("error_code") != "checkpoint_not_found" {
		t.Errorf("resume from an unknown checkpoint: %d %s", bad.status, bad.raw)
	}
	// From the first checkpoint, by name.
	res2 := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, map[string]any{"checkpoint_id": cp["id"]})
	if res2.status != http.StatusOK {
		t.Fatalf("resume from the first checkpoint: %d %s", res2.status, res2.raw)
	}
	if c, _ := res2.body["checkpoint"].(map[string]any); c == nil || c["id"] != cp["id"] {
		t.Errorf("resumed from %s, want the first checkpoint", res2.raw)
	}
	if out := s.bash(t, id, tok, "ls only-in-fork.txt 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Errorf("the fork's file is in its source: %q", out)
	}
	if k := s.call(http.MethodPost, "/api/remote_agents/"+id+"/kill", appKey, nil); k.status != http.StatusOK {
		t.Fatalf("kill: %d %s", k.status, k.raw)
	}
	if gone := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", appKey, nil); gone.status != http.StatusConflict {
		t.Errorf("resume of a killed agent: %d %s", gone.status, gone.raw)
	}
	// Ended for good: its checkpoints are deleted; its fork's are its own.
	eventually(t, 30*time.Second, "the killed agent's checkpoints deleted", func() bool {
		list, _, err := s.srv.Env.Checkpoints().List(t.Context(), id, "", 0)
		return err == nil && len(list) == 0
	})
	if list, _, err := s.srv.Env.Checkpoints().List(t.Context(), forkID, "", 0); err != nil || len(list) != 1 {
		t.Errorf("the fork's checkpoints: %v, %v", list, err)
	}
}

// TestResumeClaimsAWarmSandbox: a resume starts on a warm pool sandbox of
// the agent's type when one is idle, and its workspace is the checkpoint's
// alone: what the type prepared in the warm sandbox is not mixed in.
func TestResumeClaimsAWarmSandbox(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), withoutRefillOnClaim())
	ws := map[string]any{"enabled": true, "repo_source": map[string]any{"type": "none"}, "warm_pool_size": 1,
		"setup_commands": []string{"echo prepared > prepared.txt"}, "tools": []string{"bash"}}
	if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "warm-resume", "name": "warm-resume", "workspace_config": ws}); r.status != http.StatusCreated {
		t.Fatalf("create type: %d %s", r.status, r.raw)
	}
	s.sweep()
	s.waitIdle("warm-resume", 1)
	body := createBody("Hello")
	body["agent_type"] = "warm-resume"
	r := s.create(body)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id, tok := r.str("agent_id"), r.str("session_token")
	if a := s.alive(id, tok); a.body["from_pool"] != true {
		t.Fatalf("create did not claim the warm sandbox: %s", a.raw)
	}
	s.waitAgentMessages(t, id, tok, 1)
	s.bash(t, id, tok, "rm prepared.txt && echo mine > mine.txt")
	s.sweep()
	s.waitIdle("warm-resume", 1)
	if p := s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil); p.status != http.StatusOK || p.str("state") != "paused" {
		t.Fatalf("pause: %d %s", p.status, p.raw)
	}
	res := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, nil)
	if res.status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.status, res.raw)
	}
	if a := s.alive(id, tok); a.body["from_pool"] != true {
		t.Errorf("the resume did not claim the warm sandbox: %s", a.raw)
	}
	if _, idle, _ := s.warmPool("warm-resume"); idle != 0 {
		t.Errorf("the pool has %d idle after the resume's claim, want 0", idle)
	}
	if got := s.bash(t, id, tok, "cat mine.txt; ls prepared.txt 2>&1 || true"); !strings.Contains(got, "mine") || !strings.Contains(got, "No such file") {
		t.Errorf("the resumed workspace: %q; want mine.txt and not prepared.txt (the warm sandbox's preparation)", got)
	}
}

// crash kills the process sandbox ref and every process below it at once
// (SIGKILL; its commands may run in process groups of their own): it
// reports nothing, as a sandbox lost is.
func crash(t *testing.T, ref string) {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimPrefix(ref, "pid:"))
	if err != nil {
		t.Fatalf("sandbox %q is not a process", ref)
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", tree[i]))
		for _, f := range tasks {
			raw, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(raw)) {
				if n, err := strconv.Atoi(c); err == nil {
					tree = append(tree, n)
				}
			}
		}
	}
	// Stopped first, so that none forks away meanwhile.
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// agentMessage is an agent.message event: its text and the context it
// was written with.
type agentMessage struct {
	text    string
	context float64
}

// waitAgentMessages waits until agent id has at least n agent.message
// events, and returns them in order.
func (s *stack) waitAgentMessages(t testing.TB, id, tok string, n int) []agentMessage {
	t.Helper()
	var out []agentMessage
	eventually(t, 60*time.Second, "the agent's messages", func() bool {
		evs, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
		if err != nil {
			return false
		}
		out = out[:0]
		for _, e := range evs {
			if e.Type != sandboxwire.TypeAgentMessage {
				continue
			}
			text, _ := e.Data["text"].(string)
			usage, _ := e.Data["usage"].(map[string]any)
			ctxTokens, _ := usage["context_tokens"].(float64)
			out = append(out, agentMessage{text: text, context: ctxTokens})
		}
		return len(out) >= n
	})
	return out
}

// TestFaultSandboxKilledMidCheckpoint: a sandbox killed while its pause's
// checkpoint is written (its chunks uploaded, its commit not yet taken)
// leaves the agent paused on its last committed checkpoint, whole: resumed,
// it has the files as that checkpoint kept them, not half of the new one.
func TestFaultSandboxKilledMidCheckpoint(t *testing.T) {
	t.Log(`nothing lost: the agent's last committed checkpoint is what a resume brings back, whatever a kill during the next one wrote; ` +
		`the session is paused (reason crashed), not ended, and no sandbox runs for it`)
	t.Parallel()
	var (
		mu      sync.Mutex
		block   bool
		arrived = make(chan struct{}, 1)
		release = make(chan struct{})
	)
	hold := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			b := block
			mu.Unlock()
			if b && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/"+sandboxwire.RouteCheckpoints) {
				arrived <- struct{}{}
				<-release
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"status":503,"error_code":"service_unavailable","message":"The sandbox was killed.","retryable":true}`))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), devtest.WithHandler(hold))
	r := s.createReady(createBody("Hello"))
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id, tok := r.str("agent_id"), r.str("session_token")
	s.bash(t, id, tok, "echo first > kept.txt")
	if p := s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil); p.status != http.StatusOK || p.str("state") != "paused" {
		t.Fatalf("first pause: %d %s", p.status, p.raw)
	}
	if res := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, nil); res.status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.status, res.raw)
	}
	s.bash(t, id, tok, "echo second > kept.txt && echo new > added.txt")

	mu.Lock()
	block = true
	mu.Unlock()
	paused := make(chan reply, 1)
	go func() { paused <- s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil) }()
	<-arrived // the chunks are up; the commit waits
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	crash(t, sess.SandboxRef)
	close(release)
	mu.Lock()
	block = false
	mu.Unlock()
	p := <-paused
	eventually(t, 30*time.Second, "the agent paused on its last checkpoint", func() bool {
		a := s.alive(id, tok)
		return a.str("state") == "paused"
	})
	if p.status != http.StatusOK && p.status != http.StatusServiceUnavailable {
		t.Errorf("the interrupted pause answered %d %s", p.status, p.raw)
	}
	after, _ := s.srv.Env.SessionStore().Get(t.Context(), id)
	if after.Reason != "crashed" || after.CheckpointID != sess.CheckpointID || slices.Contains(s.srv.Launcher.Running(), after.SandboxRef) {
		t.Errorf("after the kill: %s (%s), checkpoint %s (was %s)", after.State, after.Reason, after.CheckpointID, sess.CheckpointID)
	}
	if res := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, nil); res.status != http.StatusOK {
		t.Fatalf("resume after the kill: %d %s", res.status, res.raw)
	}
	if out := s.bash(t, id, tok, "cat kept.txt; ls added.txt 2>&1 || true"); !strings.Contains(out, "first") || strings.Contains(out, "second") || !strings.Contains(out, "No such file") {
		t.Errorf("resumed from the last committed checkpoint, the workspace reads %q", out)
	}
}

// TestFaultSandboxCrashLosesAtMostTheCheckpointInterval: a sandbox writes a
// checkpoint between turns every RA_CHECKPOINT_INTERVAL_SECONDS; one that
// crashes leaves its agent paused on the last (reason crashed), not ended,
// and a resume brings back what it held.
func TestFaultSandboxCrashLosesAtMostTheCheckpointInterval(t *testing.T) {
	t.Log(`nothing lost but the interval: after a crash the agent is paused on its last periodic checkpoint and resumes with its files`)
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), withConfig(func(c *config.RemoteAgents) { c.CheckpointInterval = time.Second }))
	r := s.createReady(createBody("Hello"))
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id, tok := r.str("agent_id"), r.str("session_token")
	s.bash(t, id, tok, "echo saved > saved.txt")
	cps := s.srv.Env.Checkpoints()
	eventually(t, 60*time.Second, "a periodic checkpoint holding saved.txt", func() bool {
		sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
		if err != nil || sess.CheckpointID == "" {
			return false
		}
		cp, err := cps.Get(t.Context(), id, sess.CheckpointID)
		if err != nil || cp.Reason != sandboxwire.CheckpointPeriodic {
			return false
		}
		m, err := cps.Manifest(t.Context(), id, cp)
		return err == nil && slices.ContainsFunc(m.Entries, func(e sandboxwire.Entry) bool { return e.Path == "saved.txt" })
	})
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	crash(t, sess.SandboxRef)
	eventually(t, 30*time.Second, "the crashed agent paused", func() bool {
		a := s.alive(id, tok)
		return a.str("state") == "paused" && a.body["alive"] == true
	})
	if after, _ := s.srv.Env.SessionStore().Get(t.Context(), id); after.Reason != "crashed" {
		t.Errorf("paused with reason %q, want crashed", after.Reason)
	}
	if res := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, nil); res.status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.status, res.raw)
	}
	if out := s.bash(t, id, tok, "cat saved.txt"); !strings.Contains(out, "stdout:\nsaved\n") {
		t.Errorf("after the crash and the resume saved.txt reads %q", out)
	}
}

// TestIdleAgentsPauseAndAMessageResumesThem: a type with on_idle pause
// pauses its agents at their idle limit (a checkpoint, then no sandbox)
// instead of ending them; with resume_on_message, a message sent to the
// paused agent resumes it, and the agent answers it with its files there.
func TestIdleAgentsPauseAndAMessageResumesThem(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1", "RA_HEARTBEAT_SECONDS=1"))
	s.putType(t, "napper", map[string]any{"enabled": true, "repo_source": map[string]any{"type": "none"}, "tools": []string{"bash", "read"},
		"session_limits": map[string]any{"idle_timeout_seconds": 2}, "on_idle": "pause", "resume_on_message": true})
	if cfg := s.call(http.MethodGet, agentTypes+"/napper/workspace-config", appKey, nil); cfg.body["on_idle"] != "pause" || cfg.body["resume_on_message"] != true {
		t.Errorf("the type's workspace config: %s", cfg.raw)
	}
	id, tok := s.createTyped(t, "napper")
	s.bash(t, id, tok, "echo kept > kept.txt")
	eventually(t, 60*time.Second, "the idle agent paused", func() bool {
		return s.alive(id, tok).str("state") == "paused"
	})
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || sess.Reason != "idle_timeout" || sess.CheckpointID == "" {
		t.Fatalf("paused: %s (%s), checkpoint %q, %v", sess.State, sess.Reason, sess.CheckpointID, err)
	}
	before := len(s.waitAgentMessages(t, id, tok, 1))
	if m := s.call(http.MethodPost, "/api/remote_agents/"+id+"/messages", tok, map[string]any{"text": "Wake up"}); m.status != http.StatusOK {
		t.Fatalf("message: %d %s", m.status, m.raw)
	}
	msgs := s.waitAgentMessages(t, id, tok, before+1)
	if last := msgs[len(msgs)-1]; !strings.Contains(last.text, "Wake up") {
		t.Errorf("after the message resumed it the agent said %q", last.text)
	}
	if out := s.bash(t, id, tok, "cat kept.txt"); !strings.Contains(out, "stdout:\nkept\n") {
		t.Errorf("resumed by a message, kept.txt reads %q", out)
	}
}

// TestFaultWorkerKilledBetweenCheckpointAndStop: the worker that takes a
// paused agent's session.stop is killed before it stops anything, and SQS
// delivers the stop again, twice, only after the agent was resumed. The
// paused sandbox stopped by itself once its checkpoint was committed;
// the late stop of its generation stops nothing of the next: the agent
// runs one sandbox, with every file.
func TestFaultWorkerKilledBetweenCheckpointAndStop(t *testing.T) {
	t.Log(`nothing lost, nothing running twice: a stop of a paused generation delivered after the resume leaves the resumed sandbox alone`)
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	id, tok := s.mustCreate()
	s.bash(t, id, tok, "echo kept > kept.txt")
	if p := s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil); p.status != http.StatusOK || p.str("state") != "paused" {
		t.Fatalf("pause: %d %s", p.status, p.raw)
	}
	paused, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	// Before any worker stops it, the paused sandbox is gone: it stopped
	// itself once its checkpoint was committed.
	eventually(t, 30*time.Second, "the paused sandbox stopped by itself", func() bool {
		return !slices.Contains(s.srv.Launcher.Running(), paused.SandboxRef)
	})
	if res := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, nil); res.status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.status, res.raw)
	}
	resumed, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Generation != paused.Generation+1 || resumed.SandboxRef == "" || resumed.SandboxRef == paused.SandboxRef {
		t.Fatalf("resumed: generation %d, sandbox %q; paused: generation %d, sandbox %q", resumed.Generation, resumed.SandboxRef, paused.Generation, paused.SandboxRef)
	}
	stop := fmt.Sprintf(`{"type":"session.stop","session_id":%q,"generation":%d}`, id, paused.Generation)
	faultDeliver(t, faultWorker(t, s), "stop-"+id, stop, stop)
	after, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || !slices.Contains([]string{"ready", "working", "idle"}, string(after.State)) || after.SandboxRef != resumed.SandboxRef ||
		!slices.Contains(s.srv.Launcher.Running(), resumed.SandboxRef) {
		t.Fatalf("after the late stops: %s, sandbox %q (running %v), %v; want the resumed sandbox %q running", after.State, after.SandboxRef,
			s.srv.Launcher.Running(), err, resumed.SandboxRef)
	}
	if got := faultLaunches(s, id); len(got) != 2 {
		t.Errorf("launches %v: want the first and the resume's", got)
	}
	if out := s.bash(t, id, tok, "cat kept.txt"); !strings.Contains(out, "kept") {
		t.Errorf("after the late stops kept.txt reads %q", out)
	}
}

// TestInterruptedSandboxPausesOnAFreshCheckpoint: a sandbox stopped by a
// signal its session did not order (a Fargate task interrupted) writes a
// checkpoint on its way out and leaves its agent paused on it, reason
// shutdown, rather than ended with its work; a resume has every file.
func TestInterruptedSandboxPausesOnAFreshCheckpoint(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	r := s.createReady(createBody("Hello"))
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id, tok := r.str("agent_id"), r.str("session_token")
	s.bash(t, id, tok, "echo unsaved > unsaved.txt")
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || sess.CheckpointID != "" {
		t.Fatalf("before the signal: checkpoint %q, %v; want none yet", sess.CheckpointID, err)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(sess.SandboxRef, "pid:"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the interrupted agent paused", func() bool {
		return s.alive(id, tok).str("state") == "paused"
	})
	after, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil || after.Reason != "shutdown" || after.CheckpointID == "" {
		t.Fatalf("paused: reason %q, checkpoint %q, %v; want shutdown, on a checkpoint", after.Reason, after.CheckpointID, err)
	}
	if cp, err := s.srv.Env.Checkpoints().Get(t.Context(), id, after.CheckpointID); err != nil || cp.Reason != sandboxwire.CheckpointShutdown {
		t.Errorf("its checkpoint: %+v, %v; want reason shutdown", cp, err)
	}
	if res := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, nil); res.status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.status, res.raw)
	}
	if out := s.bash(t, id, tok, "cat unsaved.txt"); !strings.Contains(out, "unsaved") {
		t.Errorf("after the resume unsaved.txt reads %q", out)
	}
}

// TestCheckpointDuringALongTurn: a periodic checkpoint is written while a
// turn runs (here a command of minutes), not only between turns: a sandbox
// lost in the middle of a long turn loses at most the interval. Resumed
// from it, the agent has the files the turn wrote and does the turn again.
func TestCheckpointDuringALongTurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "script.jsonl")
	step, _ := json.Marshal(map[string]any{"text": "Working.", "tool_calls": []any{map[string]any{"name": "bash", "args": map[string]any{
		"command": "echo written > mid.txt && exec sleep 300"}}}})
	if err := os.WriteFile(script, append(step, []byte("\n{\"text\":\"Done.\"}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+script, "RA_NO_TMUX=1"), withConfig(func(c *config.RemoteAgents) { c.CheckpointInterval = time.Second }))
	id, tok := s.mustCreate()
	cps := s.srv.Env.Checkpoints()
	var sess session.Session
	eventually(t, 60*time.Second, "a checkpoint holding mid.txt while the turn runs", func() bool {
		var err error
		sess, err = s.srv.Env.SessionStore().Get(t.Context(), id)
		if err != nil || sess.CheckpointID == "" {
			return false
		}
		cp, err := cps.Get(t.Context(), id, sess.CheckpointID)
		if err != nil {
			return false
		}
		m, err := cps.Manifest(t.Context(), id, cp)
		return err == nil && slices.ContainsFunc(m.Entries, func(e sandboxwire.Entry) bool { return e.Path == "mid.txt" })
	})
	if sess.State != session.Working {
		t.Fatalf("the checkpoint came with the agent %s; want it working (the turn in its command)", sess.State)
	}
	crash(t, sess.SandboxRef)
	eventually(t, 30*time.Second, "the crashed agent paused", func() bool { return s.alive(id, tok).str("state") == "paused" })
	if res := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", tok, nil); res.status != http.StatusOK {
		t.Fatalf("resume: %d %s", res.status, res.raw)
	}
	// The turn is done again: its input was waiting in the checkpoint.
	eventually(t, 60*time.Second, "the turn done again after the resume", func() bool {
		evs, err := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 1000)
		if err != nil {
			return false
		}
		working := 0
		for _, e := range evs {
			if st, _ := e.Data["state"].(string); e.Type == sandboxwire.TypeStateChanged && st == "working" {
				working++
			}
		}
		return working >= 2
	})
	if k := s.call(http.MethodPost, "/api/remote_agents/"+id+"/kill", appKey, nil); k.status != http.StatusOK {
		t.Errorf("kill: %d %s", k.status, k.raw)
	}
}

// resumeReady resumes agent id as the documented client does: an answer
// still resuming (its wait passed on a loaded machine) is sent again, which
// keeps waiting for the same resume.
func (s *stack) resumeReady(id, bearer string) reply {
	s.t.Helper()
	r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", bearer, nil)
	for tries := 1; tries < 6 && r.status == http.StatusOK && r.str("state") == "resuming"; tries++ {
		r = s.call(http.MethodPost, "/api/remote_agents/"+id+"/resume", bearer, nil)
	}
	return r
}
