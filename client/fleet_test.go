package client

import (
	"errors"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/devtest"
)

// The app lists its agents, kills one by its app key, and sees it ended.
func TestListAndKill(t *testing.T) {
	t.Parallel()
	srv := devtest.Start(t)
	c := newClient(t, srv.URL)
	ctx := bounded(t)
	a, err := c.Create(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.List(ctx, ListOptions{AliveOnly: true, Limit: 1})
	if err != nil || len(page.Agents) != 1 || page.Agents[0].AgentID != b.AgentID || page.NextCursor == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	page, err = c.List(ctx, ListOptions{AliveOnly: true, Limit: 1, Cursor: page.NextCursor})
	if err != nil || len(page.Agents) != 1 || page.Agents[0].AgentID != a.AgentID {
		t.Fatalf("second page: %+v %v", page, err)
	}
	out, err := c.Kill(ctx, a.AgentID)
	if err != nil || out.Status != "killed" || out.Reason != "killed" {
		t.Fatalf("kill: %+v %v", out, err)
	}
	page, err = c.List(ctx, ListOptions{States: []string{"ended"}})
	if err != nil || len(page.Agents) != 1 || page.Agents[0].AgentID != a.AgentID || page.Agents[0].EndReason != "killed" || page.NextCursor != "" {
		t.Fatalf("ended: %+v %v", page, err)
	}
	var apiErr *Error
	if _, err := c.List(ctx, ListOptions{Limit: 1000}); err == nil || !errors.As(err, &apiErr) || apiErr.Code != "invalid_request" {
		t.Errorf("limit 1000: %v", err)
	}
}

// The app pauses an agent, lists its checkpoint, forks it and resumes it
// from that checkpoint by name.
func TestPauseForkAndResume(t *testing.T) {
	t.Parallel()
	srv := devtest.Start(t)
	c := newClient(t, srv.URL)
	ctx := bounded(t)
	a, err := c.Create(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Pause(ctx, a.AgentID)
	if err != nil || string(p.State) != "paused" || p.Checkpoint.ID == "" {
		t.Fatalf("pause: %+v %v", p, err)
	}
	list, err := c.Checkpoints(ctx, a.AgentID, "")
	if err != nil || len(list.Checkpoints) != 1 || list.Checkpoints[0].ID != p.Checkpoint.ID {
		t.Fatalf("checkpoints: %+v %v", list, err)
	}
	f, err := c.Fork(ctx, a.AgentID)
	if err != nil || f.AgentID == a.AgentID || f.SessionToken == "" {
		t.Fatalf("fork: %+v %v", f, err)
	}
	r, err := c.Resume(ctx, a.AgentID, p.Checkpoint.ID)
	if err != nil || string(r.State) == "paused" || r.Checkpoint.ID != p.Checkpoint.ID {
		t.Fatalf("resume: %+v %v", r, err)
	}
	var apiErr *Error
	if _, err := c.Resume(ctx, a.AgentID, ""); err != nil {
		t.Errorf("a resume of a running agent: %v", err)
	}
	if _, err := c.Pause(ctx, "00000000-0000-4000-8000-000000000000"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("a pause of an unknown agent: %v", err)
	}
}
