package sandboxchannel_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// TestChannelJobUploads: a job's sandbox gets upload URLs for its output/
// files and its log under its session's job, jobs/{job_id}/…, whatever it
// claims; other paths, and sandboxes of no job, are refused.
func TestChannelJobUploads(t *testing.T) {
	t.Parallel()
	c := newChannel(t, session.Working)
	tok, hash := token.New(token.Sandbox)
	jobID := uuid.NewString()
	sess := session.Session{ID: uuid.NewString(), Blueprint: session.Blueprint{
		JobID:           jobID,
		TmuxSessionName: "ra-job",
	},
		State: session.Working, Generation: 1, SandboxTokenHash: hash,
		CreatedAt: c.now, UpdatedAt: c.now}
	if err := c.store.Create(t.Context(), sess, nil); err != nil {
		t.Fatal(err)
	}
	file := func(path string, size int64) sandboxwire.UploadFile {
		return sandboxwire.UploadFile{Path: path, SizeBytes: size}
	}
	req := func(files ...sandboxwire.UploadFile) sandboxwire.UploadsRequest {
		return sandboxwire.UploadsRequest{Tool: sandboxwire.JobUploads, ToolCallID: uuid.NewString(), Files: files}
	}
	out, err := c.ch.Uploads(t.Context(), c.auth(t, sess.ID, tok), req(file("output/report.md", 3), file(sandboxwire.JobLogPath, 4)))
	if err != nil || len(out.Uploads) != 2 {
		t.Fatalf("uploads %+v %v", out, err)
	}
	for i, want := range []string{"jobs/" + jobID + "/output/report.md", "jobs/" + jobID + "/logs/job.log"} {
		if out.Uploads[i].Key != want {
			t.Errorf("key %q, want %q", out.Uploads[i].Key, want)
		}
	}
	if status := putTo(t, out.Uploads[0], "abc"); status != 200 {
		t.Fatalf("put: %d", status)
	}
	if r, _, err := c.bucket.Get(t.Context(), "jobs/"+jobID+"/output/report.md"); err != nil {
		t.Errorf("uploaded: %v", err)
	} else {
		_ = r.Close()
	}
	for name, bad := range map[string]sandboxwire.UploadsRequest{
		"input":     req(file("input/input.json", 1)),
		"work":      req(file("work/x", 1)),
		"other log": req(file("logs/other.log", 1)),
		"dotdot":    req(file("output/../../other-job/x", 1)),
		"absolute":  req(file("/output/x", 1)),
		"twice":     req(file("output/a", 1), file("output/a", 1)),
		"too large": req(file("output/a", sandboxwire.MaxEvidenceBytes+1)),
		"no files":  req(),
		"bad type":  {Tool: sandboxwire.JobUploads, ToolCallID: "j", Files: []sandboxwire.UploadFile{{Path: "output/a", SizeBytes: 1, ContentType: "no-slash"}}},
	} {
		if _, err := c.ch.Uploads(t.Context(), c.auth(t, sess.ID, tok), bad); code(err) != apierror.InvalidRequest {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}
	// A session of no job uploads no job's files.
	if _, err := c.ch.Uploads(t.Context(), c.auth(t, c.sess.ID, c.tok), req(file("output/a", 1))); code(err) != apierror.InvalidRequest {
		t.Errorf("a session of no job: %v", err)
	}
}
