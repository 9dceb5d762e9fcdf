package devserver_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/jobevents"
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
