package systemtest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// A job end to end, with the real agent in job mode: the orchestrator's
// signed create, the sandbox launched from job.run, a scripted model that
// reads its input and writes two files to output/ (and tries to write
// input/, refused), the job completed with two file references and a log
// reference whose objects match them, and its events once each, in order, on
// the orchestrator queue.
func TestJobRunsEndToEnd(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "script.jsonl")
	steps := `{"text":"reading","tool_calls":[{"name":"read","args":{"path":"input/input.json"}}]}
{"text":"writing","tool_calls":[{"name":"write","args":{"path":"output/report.md","content":"# Report\nTwo files."}},{"name":"write","args":{"path":"output/data.csv","content":"x,y\n1,2\n"}},{"name":"write","args":{"path":"input/brief.md","content":"changed"}}]}
{"text":"Done: output/report.md and output/data.csv."}
`
	if err := os.WriteFile(script, []byte(steps), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+script, "RA_NO_TMUX=1"))
	o := newOrchestrator(s)
	step := uuid.NewString()
	agent := o.putProfile(t, step)
	created := o.call(http.MethodPost, "/internal/jobs", o.jobBody(agent, step, 100000), step)
	id := created.str("id")
	if created.status != http.StatusCreated || id == "" {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	// The log followed live from the create on: every event once, in
	// order, then the end with the job's status; again from the middle once
	// the job is over, the same events from there.
	live := o.followLog(t, id, step, "lambda", 0)
	if live.status != http.StatusOK {
		t.Fatalf("log stream: %d", live.status)
	}
	followed := live.untilEnd(t, 90*time.Second)
	checkLogStream(t, id, followed, 0)
	mid := followed[len(followed)/2].ID
	checkLogStream(t, id, o.followLog(t, id, step, "lambda", mid).untilEnd(t, 30*time.Second), mid)
	if wrong := o.followLog(t, id, step, "execute-api", 0); wrong.status != http.StatusForbidden {
		t.Errorf("a stream signed for execute-api: %d, want 403 (its URL is a function's: lambda)", wrong.status)
	}
	var job reply
	eventually(t, 90*time.Second, "the job finished", func() bool {
		job = o.call(http.MethodGet, "/internal/jobs/"+id, nil, step)
		st := job.str("status")
		return st == "completed" || st == "failed" || st == "cancelled"
	})
	if job.str("status") != "completed" || job.body["started_at"] == nil || job.body["finished_at"] == nil {
		t.Fatalf("job: %s", job.raw)
	}
	outs := o.call(http.MethodGet, "/internal/jobs/"+id+"/outputs", nil, step)
	list, _ := outs.body["outputs"].([]any)
	var types, paths []string
	for _, it := range list {
		m := it.(map[string]any)
		types = append(types, m["output_type"].(string))
		ref := m["reference"].(map[string]any)
		if p, ok := ref["path"].(string); ok {
			paths = append(paths, p)
		}
		rc, _, err := s.srv.Env.Bucket().Get(t.Context(), ref["key"].(string))
		if err != nil {
			t.Errorf("reference %v: %v", ref, err)
			continue
		}
		got, _ := io.ReadAll(rc)
		_ = rc.Close()
		sum := sha256.Sum256(got)
		if hex.EncodeToString(sum[:]) != ref["sha256"] || float64(len(got)) != ref["size"] {
			t.Errorf("reference %v does not match its object", ref)
		}
		if ref["path"] == "output/report.md" && string(got) != "# Report\nTwo files." {
			t.Errorf("output/report.md holds %q", got)
		}
	}
	slices.Sort(types)
	if !slices.Equal(types, []string{"file", "file", "log"}) || !slices.Contains(paths, "output/report.md") || !slices.Contains(paths, "output/data.csv") {
		t.Errorf("outputs %s", outs.raw)
	}
	if r := o.call(http.MethodGet, "/internal/jobs/"+id+"/logs", nil, step); r.status != http.StatusOK || !strings.Contains(r.raw, `"policy_violation"`) || !strings.Contains(r.raw, `"job_completed"`) {
		t.Errorf("whole log: %d %.400s", r.status, r.raw)
	}
	wantTypes(t, s.jobEvents(t, id, 4), jobevents.Created, jobevents.Started, jobevents.OutputGenerated, jobevents.Completed)
}

// checkLogStream checks a job's log stream read after event after: the
// events from after+1 on, numbered without a gap, the agent's messages among
// them, then the end with the job's id and its final status.
func checkLogStream(t *testing.T, id string, evs []sseEvent, after int64) {
	t.Helper()
	end := evs[len(evs)-1]
	if end.Type != "end" || end.Data["job_id"] != id || end.Data["status"] != "completed" {
		t.Errorf("the stream ended with %+v, want end of job %s, completed", end, id)
	}
	var texts []string
	for i, ev := range evs[:len(evs)-1] {
		if ev.ID != after+int64(i)+1 {
			t.Fatalf("event %d has id %d, want %d (after %d)", i, ev.ID, after+int64(i)+1, after)
		}
		if ev.Data["seq"] != float64(ev.ID) || ev.Data["type"] != ev.Type || ev.Data["at"] == nil {
			t.Errorf("event %d's data %v: want seq, type and at as in GET …/logs", ev.ID, ev.Data)
		}
		if data, _ := ev.Data["data"].(map[string]any); ev.Type == "agent.message" {
			texts = append(texts, fmt.Sprint(data["text"]))
		}
	}
	if after == 0 && !slices.Contains(texts, "Done: output/report.md and output/data.csv.") {
		t.Errorf("agent messages %q lack the last one", texts)
	}
}

// TestJobShellIsConfinedToItsJob: a job whose model runs shell commands (the
// real agent, bash confined by Landlock, no network) reads its input and
// writes its output, but cannot read a file outside its job directory by
// path or through a symlink it makes, nor change its input, nor reach the
// network.
func TestJobShellIsConfinedToItsJob(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = listener.Close() }()
	bash := bashCall
	steps := strings.Join([]string{
		`{"text":"copy","tool_calls":[` + bash("cat input/input.json > output/copy.json") + `]}`,
		`{"text":"peek","tool_calls":[` + bash("cat "+secret+" > output/leak.txt") + `]}`,
		`{"text":"link","tool_calls":[` + bash("ln -s "+secret+" work/link; cat work/link > output/leak2.txt") + `]}`,
		`{"text":"climb","tool_calls":[` + bash("cat ../../../../../../../.."+secret+" > output/leak3.txt") + `]}`,
		`{"text":"input","tool_calls":[` + bash("echo changed > input/brief.md") + `]}`,
		`{"text":"net","tool_calls":[` + bash("exec 3<>/dev/tcp/"+strings.Replace(listener.Addr().String(), ":", "/", 1)+" && echo reached > output/net.txt") + `]}`,
		`{"text":"Done."}`,
	}, "\n") + "\n"
	script := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(script, []byte(steps), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+script, "RA_NO_TMUX=1"))
	o := newOrchestrator(s)
	agent := o.shellProfile(t)
	id, step, job := o.runJob(t, agent, false)
	got := s.jobOutputs(t, o, id, step)
	if !strings.Contains(got["output/copy.json"], "write two files") {
		t.Errorf("the job could not copy its input: %q (outputs %v; job %s; sandbox log %s)", got["output/copy.json"], got, job.raw,
			s.sandboxLog(t, s.jobSession(t, id)))
	}
	for path, content := range got {
		if strings.Contains(content, "top secret") && path != "log" {
			t.Errorf("%s holds the secret outside the job", path)
		}
	}
	if _, ok := got["output/net.txt"]; ok {
		t.Error("a job without network reached the network")
	}
	sid := s.jobSession(t, id)
	brief := filepath.Join(s.work, "sandboxes", sid+"-1", id, "input", "brief.md")
	if b, err := os.ReadFile(brief); err != nil || string(b) != "# Brief" {
		t.Errorf("input/brief.md = %q (%v): the input was changed", b, err)
	}
}

// TestJobStartsFromItsProfilesWarmPool: a profile with a warm_pool_size
// keeps idle sandboxes (the pool's type job.<profile>), and its job starts
// in one of them, runs and completes; a job of it with a memory constraint
// is launched cold at its size, the pool untouched.
func TestJobStartsFromItsProfilesWarmPool(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(script, []byte(`{"text":"Done."}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+script, "RA_NO_TMUX=1"), withoutRefillOnClaim())
	o := newOrchestrator(s)
	step := uuid.NewString()
	agent := uuid.NewString()
	r := o.call(http.MethodPut, "/internal/agents/"+agent, map[string]any{"name": "Pooled", "agent_level": "L1", "llm_provider": "scripted",
		"llm_model": "scripted", "max_tokens": 4096, "allowed_skills": []string{"read", "write"}, "warm_pool_size": 1}, step)
	if r.status != http.StatusOK || r.body["warm_pool_size"] != float64(1) {
		t.Fatalf("put profile: %d %s", r.status, r.raw)
	}
	if bad := o.call(http.MethodPut, "/internal/agents/"+uuid.NewString(), map[string]any{"name": "P", "agent_level": "L1", "llm_provider": "scripted",
		"llm_model": "scripted", "max_tokens": 4096, "allowed_skills": []string{}, "warm_pool_size": 101}, step); bad.status != http.StatusBadRequest {
		t.Errorf("warm_pool_size 101: %d %s", bad.status, bad.raw)
	}
	pooled := func() []pool.Sandbox {
		list, err := s.poolStore().List(t.Context(), registry.Platform, job.PoolType(agent))
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	s.sweep()
	eventually(t, 90*time.Second, "the profile's pool has an idle sandbox", func() bool {
		list := pooled()
		return len(list) == 1 && list[0].State == pool.Idle
	})
	warm := pooled()[0]
	finish := func(constraints map[string]any) {
		t.Helper()
		step := uuid.NewString()
		body := o.jobBody(agent, step, 100000)
		if constraints != nil {
			body["constraints"] = constraints
		}
		created := o.call(http.MethodPost, "/internal/jobs", body, step)
		id := created.str("id")
		if created.status != http.StatusCreated || id == "" {
			t.Fatalf("create: %d %s", created.status, created.raw)
		}
		var job reply
		eventually(t, 90*time.Second, "job "+id+" finished", func() bool {
			job = o.call(http.MethodGet, "/internal/jobs/"+id, nil, step)
			st := job.str("status")
			return st == "completed" || st == "failed" || st == "cancelled"
		})
		if job.str("status") != "completed" {
			t.Fatalf("job: %s", job.raw)
		}
	}
	// With a memory constraint: not the pool's size, a sandbox of its own.
	finish(map[string]any{"timeout": 600, "network": false, "memory": 3000})
	if list := pooled(); len(list) != 1 || list[0].ID != warm.ID || list[0].State != pool.Idle {
		t.Fatalf("after a job with a memory constraint the pool is %+v, want its idle sandbox untouched", list)
	}
	finish(nil)
	list := pooled()
	if len(list) != 1 || list[0].ID != warm.ID || list[0].ClaimedBy == "" {
		t.Fatalf("after a job without constraint the pool is %+v, want its sandbox claimed", list)
	}
	if sess, err := s.srv.Env.SessionStore().Get(t.Context(), list[0].ClaimedBy); err != nil || sess.JobID == "" || sess.PoolSandbox != warm.ID {
		t.Errorf("the claiming session: %+v %v, want a job's, from the pool", sess, err)
	}
}

// bashCall is a scripted model's call of the bash tool with command.
func bashCall(command string) string {
	raw, _ := json.Marshal(map[string]any{"name": "bash", "args": map[string]any{"command": command}})
	return string(raw)
}

// shellProfile registers a scripted profile whose tools are read, write and
// bash, and returns its id.
func (o *orchestrator) shellProfile(t *testing.T) string {
	t.Helper()
	agent := uuid.NewString()
	if r := o.call(http.MethodPut, "/internal/agents/"+agent, map[string]any{"name": "Shell", "agent_level": "L1", "llm_provider": "scripted",
		"llm_model": "scripted", "max_tokens": 4096, "allowed_skills": []string{"read", "write", "bash"}}, uuid.NewString()); r.status != http.StatusOK {
		t.Fatalf("profile: %d %s", r.status, r.raw)
	}
	return agent
}

// runJob creates a job of profile agent, with network or not, and waits
// until it is over: its id, plan step and last view.
func (o *orchestrator) runJob(t *testing.T, agent string, network bool) (string, string, reply) {
	t.Helper()
	step := uuid.NewString()
	body := o.jobBody(agent, step, 100000)
	body["constraints"] = map[string]any{"timeout": 600, "network": network}
	created := o.call(http.MethodPost, "/internal/jobs", body, step)
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	id := created.str("id")
	var job reply
	eventually(t, 90*time.Second, "the job finished", func() bool {
		job = o.call(http.MethodGet, "/internal/jobs/"+id, nil, step)
		st := job.str("status")
		return st == "completed" || st == "failed" || st == "cancelled"
	})
	return id, step, job
}

// jobOutputs reads job id's outputs from the bucket, by path.
func (s *stack) jobOutputs(t *testing.T, o *orchestrator, id, step string) map[string]string {
	t.Helper()
	outs := o.call(http.MethodGet, "/internal/jobs/"+id+"/outputs", nil, step)
	list, _ := outs.body["outputs"].([]any)
	got := map[string]string{}
	for _, it := range list {
		ref := it.(map[string]any)["reference"].(map[string]any)
		p, _ := ref["path"].(string)
		rc, _, err := s.srv.Env.Bucket().Get(t.Context(), ref["key"].(string))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		_ = rc.Close()
		got[p] = string(b)
	}
	return got
}
