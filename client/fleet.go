package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/remote-agents/remote-agents/api/schema"
)

// ListOptions select and page the app's agents (List); zero fields select all.
type ListOptions struct {
	ProjectName string
	PersonaSlug string
	AgentType   string
	// States lists the states to list; AliveOnly the states not ended (not
	// with States).
	States    []string
	AliveOnly bool
	// Limit is the page size, 1..100 (0: the server's default, 50).
	Limit int
	// Cursor is the previous page's NextCursor.
	Cursor string
}

type (
	// AgentSummary is one agent of the app's list.
	AgentSummary = schema.AgentSummary
	// AgentList is one page of the app's agents; NextCursor is empty at the
	// end.
	AgentList = schema.AgentList
)

// List returns one page of the app's agents, newest first (app key). A page
// may hold fewer than Limit agents and still have a NextCursor: page on
// until it is empty.
func (c *Client) List(ctx context.Context, opts ListOptions) (*AgentList, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("project_name", opts.ProjectName)
	set("persona_slug", opts.PersonaSlug)
	set("agent_type", opts.AgentType)
	set("state", strings.Join(opts.States, ","))
	set("cursor", opts.Cursor)
	if opts.AliveOnly {
		q.Set("alive", "true")
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := pathList
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out AgentList
	err := c.retry(ctx, false, func() error {
		return c.do(ctx, http.MethodGet, path, c.appKey, nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// KillStatus answers Kill: killed, or already_terminated with the reason
// the agent ended for.
type KillStatus = schema.KillStatus

// Kill ends the agent now, with no grace, using the client's app key (the
// agent must be the app's); an ended agent is no error.
func (c *Client) Kill(ctx context.Context, agentID string) (*KillStatus, error) {
	var out KillStatus
	err := c.retry(ctx, false, func() error {
		return c.do(ctx, http.MethodPost, expand(pathKill, agentID), c.appKey, nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}
