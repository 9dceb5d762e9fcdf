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
