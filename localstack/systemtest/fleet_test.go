package systemtest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/session"
)

// putSessions writes n sessions of tenant straight into the sessions table
// (as create writes them), created a millisecond apart from base, and
// returns their ids newest first.
func (s *stack) putSessions(t testing.TB, tenant string, n int, base time.Time, tweak func(i int, sess *session.Session)) []string {
	t.Helper()
	store := s.srv.Env.SessionStore()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		id := uuid.NewString()
		ids[n-1-i] = id
		at := base.Add(time.Duration(i) * time.Millisecond)
		sess := session.Session{
			ID: id, Blueprint: session.Blueprint{
				ProjectName: "demo",
				PersonaSlug: "assistant",
			},
			Tenant: tenant, AppKeyID: "dev",
			State: session.Ended, Reason: session.ReasonShutdown,
			Generation: 1, CreatedAt: at, UpdatedAt: at, EndedAt: at.Add(time.Second),
		}
		if tweak != nil {
			tweak(i, &sess)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := store.Create(t.Context(), sess, nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

// listAll pages through GET /api/remote_agents with query q and returns the
// ids in the order served, and the number of pages.
func (s *stack) listAll(t *testing.T, bearer string, q url.Values, during func()) ([]string, int) {
	t.Helper()
	var got []string
	pages := 0
	for {
		r := s.call(http.MethodGet, "/api/remote_agents?"+q.Encode(), bearer, nil)
		if r.status != http.StatusOK {
			t.Fatalf("list: %d %s", r.status, r.raw)
		}
		pages++
		for _, a := range r.body["agents"].([]any) {
			got = append(got, a.(map[string]any)["agent_id"].(string))
		}
		if during != nil {
			during()
		}
		next, ok := r.body["next_cursor"].(string)
		if !ok {
			return got, pages
		}
		q.Set("cursor", next)
	}
}

func TestFleetListPagesWithoutLeaksGapsOrDuplicates(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.addTenant(t, "other", otherKey)
	base := time.Now().Add(-time.Hour)
	mine := s.putSessions(t, "dev", 150, base, nil)
	theirs := s.putSessions(t, "other", 100, base, nil)

	// Agents created while the pages are read are newer than the cursor: they
	// never shift what later pages hold.
	created := 0
	during := func() {
		s.putSessions(t, "dev", 3, time.Now(), nil)
		created += 3
	}
	got, pages := s.listAll(t, appKey, url.Values{"limit": {"40"}}, during)
	if pages < 4 {
		t.Errorf("%d pages for 150 agents at 40 a page", pages)
	}
	if !slices.Equal(got, mine) {
		t.Errorf("dev's list: %d agents, want its %d, newest first, each once (first diff at %d)", len(got), len(mine), firstDiff(got, mine))
	}
	other, _ := s.listAll(t, otherKey, url.Values{"limit": {"100"}}, nil)
	if !slices.Equal(other, theirs) {
		t.Errorf("other's list: %d agents, want its %d", len(other), len(theirs))
	}
	for _, id := range other {
		if slices.Contains(mine, id) {
			t.Fatalf("agent %s of dev listed to other", id)
		}
	}

	// A cursor of another tenant is refused, not followed.
	r := s.call(http.MethodGet, "/api/remote_agents?limit=10", otherKey, nil)
	cur, _ := r.body["next_cursor"].(string)
	wantError(t, s.call(http.MethodGet, "/api/remote_agents?cursor="+url.QueryEscape(cur), appKey, nil), http.StatusBadRequest, "invalid_request")
	wantError(t, s.call(http.MethodGet, "/api/remote_agents?cursor=bm9wZQ", appKey, nil), http.StatusBadRequest, "invalid_request")
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "state=sleeping", "alive=maybe", "sort=asc", "alive=true&state=ended", "alive=false&state=idle"} {
		wantError(t, s.call(http.MethodGet, "/api/remote_agents?"+q, appKey, nil), http.StatusBadRequest, "invalid_request")
	}
	wantError(t, s.call(http.MethodGet, "/api/remote_agents", "", nil), http.StatusUnauthorized, "missing_token")
	_, tok := s.mustCreate()
	wantError(t, s.call(http.MethodGet, "/api/remote_agents", tok, nil), http.StatusUnauthorized, "invalid_token")
	t.Logf("%d agents created while paging", created)
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestFleetListFilters(t *testing.T) {
	t.Parallel()
	s := start(t)
	base := time.Now().Add(-time.Hour)
	ids := s.putSessions(t, "dev", 30, base, func(i int, sess *session.Session) {
		if i%3 == 0 {
			sess.State, sess.Reason, sess.EndedAt = session.Idle, "", time.Time{}
			sess.HeartbeatAt = time.Now()
		}
		if i%2 == 0 {
			sess.AgentType = "default"
		}
		if i%5 == 0 {
			sess.PersonaSlug = "reviewer"
		}
	})
	// ids are newest first: index j is session n-1-j.
	want := func(pred func(i int) bool) []string {
		var out []string
		for j, id := range ids {
			if pred(len(ids) - 1 - j) {
				out = append(out, id)
			}
		}
		return out
	}
	for _, tc := range []struct {
		q    url.Values
		want []string
	}{
		{url.Values{"alive": {"true"}}, want(func(i int) bool { return i%3 == 0 })},
		{url.Values{"state": {"ended"}}, want(func(i int) bool { return i%3 != 0 })},
		{url.Values{"alive": {"false"}}, want(func(i int) bool { return i%3 != 0 })},
		{url.Values{"state": {"idle,ended"}}, ids},
		{url.Values{"agent_type": {"default"}}, want(func(i int) bool { return i%2 == 0 })},
		{url.Values{"persona_slug": {"reviewer"}, "alive": {"true"}}, want(func(i int) bool { return i%15 == 0 })},
		{url.Values{"project_name": {"elsewhere"}}, nil},
	} {
		tc.q.Set("limit", "4")
		got, _ := s.listAll(t, appKey, tc.q, nil)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %d agents %v, want %d", tc.q.Encode(), len(got), got, len(tc.want))
		}
	}
	r := s.call(http.MethodGet, "/api/remote_agents?limit=1&alive=true", appKey, nil)
	a := r.body["agents"].([]any)[0].(map[string]any)
	if a["alive"] != true || a["state"] != "idle" || a["created_at"] == "" || a["usage"] == nil {
		t.Errorf("an item: %v", a)
	}
	r = s.call(http.MethodGet, "/api/remote_agents?limit=1&state=ended", appKey, nil)
	a = r.body["agents"].([]any)[0].(map[string]any)
	if a["alive"] != false || a["end_reason"] != "shutdown" || a["ended_at"] == nil {
		t.Errorf("an ended item: %v", a)
	}
}

// A busy agent — its bash tool in a long command — is killed: the session
// ends before the answer, and its sandbox and the command are gone.
func TestKillEndsABusyAgentAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "busy.pid")
	script := filepath.Join(dir, "script.jsonl")
	step, _ := json.Marshal(map[string]any{"text": "Working.", "tool_calls": []any{map[string]any{"name": "bash", "args": map[string]any{
		"command": "echo $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + " && exec sleep 300"}}}})
	if err := os.WriteFile(script, append(step, []byte("\n{\"text\":\"Done.\"}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+script, "RA_NO_TMUX=1"))
	s.addTenant(t, "other", otherKey)
	id, tok := s.mustCreate()
	var busyPID int
	eventually(t, 30*time.Second, "the agent's long command started", func() bool {
		raw, err := os.ReadFile(pidFile)
		busyPID, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil && busyPID > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(busyPID, syscall.SIGKILL) })
	ref := ""
	if got, err := s.srv.Env.SessionStore().Get(t.Context(), id); err == nil {
		ref = got.SandboxRef
	}
	if !slices.Contains(s.srv.Launcher.Running(), ref) {
		t.Fatalf("sandbox %q not running: %v", ref, s.srv.Launcher.Running())
	}
	stream := s.openSSE(t, id, tok, 0, "")

	// Another app's key finds no such agent.
	wantError(t, s.call(http.MethodPost, "/api/remote_agents/"+id+"/kill", otherKey, nil), http.StatusNotFound, "agent_not_found")
	wantError(t, s.call(http.MethodPost, "/api/remote_agents/"+id+"/kill", "", nil), http.StatusUnauthorized, "missing_token")

	began := time.Now()
	r := s.call(http.MethodPost, "/api/remote_agents/"+id+"/kill", appKey, nil)
	if r.status != http.StatusOK || r.str("status") != "killed" || r.str("state") != "ended" || r.str("reason") != "killed" {
		t.Fatalf("kill: %d %s", r.status, r.raw)
	}
	if a := s.alive(id, tok); a.body["alive"] != false || a.str("state") != "ended" {
		t.Errorf("alive after kill: %s", a.raw)
	}
	eventually(t, 15*time.Second, "the sandbox and its command stopped", func() bool {
		return !slices.Contains(s.srv.Launcher.Running(), ref) && syscall.Kill(busyPID, 0) != nil
	})
	t.Logf("kill → sandbox and its command gone: %s", time.Since(began).Round(time.Millisecond))
	// The stream ends.
	drained := 0
	for range stream.events {
		drained++
	}
	t.Logf("stream closed after %d events", drained)
	again := s.call(http.MethodPost, "/api/remote_agents/"+id+"/kill", tok, nil)
	if again.status != http.StatusOK || again.str("status") != "already_terminated" {
		t.Errorf("kill again: %d %s", again.status, again.raw)
	}
	r = s.call(http.MethodGet, "/api/remote_agents?limit=1", appKey, nil)
	if a := r.body["agents"].([]any)[0].(map[string]any); a["agent_id"] != id || a["end_reason"] != "killed" {
		t.Errorf("listed: %v", a)
	}
	// A shut down agent is already terminated for kill.
	id2, tok2 := s.mustCreate()
	s.shutdown(id2, tok2)
	eventually(t, 15*time.Second, "shutdown ended", func() bool { return s.alive(id2, tok2).str("state") == "ended" })
	if r := s.call(http.MethodPost, "/api/remote_agents/"+id2+"/kill", tok2, nil); r.str("status") != "already_terminated" || r.str("reason") != "shutdown" {
		t.Errorf("kill after shutdown: %d %s", r.status, r.raw)
	}
}

func withSweepInterval(d time.Duration) option {
	return func(o *devserver.Options) { o.SweepInterval = d }
}

// A sandbox that stops heart-beating (SIGSTOP: the process is there, silent)
// is found lost by the sweep within 90 s, with nobody calling alive, and its
// sandbox is stopped.
func TestSilentSandboxIsLostWithoutAlive(t *testing.T) {
	t.Parallel()
	// Without tmux the agent is the sandbox process; its process group is the
	// whole sandbox, as a task is on Fargate.
	s := start(t, withSweepInterval(2*time.Second), withSandboxEnv("RA_NO_TMUX=1"))
	id, _ := s.mustCreate()
	store := s.srv.Env.SessionStore()
	sess, err := store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(sess.SandboxRef, "pid:"))
	if err != nil {
		t.Fatalf("sandbox ref %q", sess.SandboxRef)
	}
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGCONT) })
	stopped := time.Now()
	var got session.Session
	eventually(t, 90*time.Second, "the silent sandbox's session lost", func() bool {
		got, _ = store.Get(t.Context(), id)
		return got.State == session.Ended
	})
	if got.Reason != session.ReasonLost {
		t.Errorf("ended %s, want lost", got.Reason)
	}
	t.Logf("SIGSTOP → lost: %s", time.Since(stopped).Round(time.Second))
	eventually(t, 15*time.Second, "the lost sandbox stopped", func() bool { return !slices.Contains(s.srv.Launcher.Running(), sess.SandboxRef) })
}
