package client

import (
	"context"
	"encoding/json"
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

type (
	// PauseStatus answers Pause and Resume: where the agent is, and the
	// checkpoint it is paused on or went on from.
	PauseStatus = schema.PauseStatus
	// CheckpointList is a page of an agent's checkpoints, oldest first.
	CheckpointList = schema.CheckpointList
)

// Pause checkpoints the agent's files and conversation and stops its
// sandbox, with the client's app key; it answers once the agent is paused
// (or, past the platform's wait, still pausing: pause again). A pause of a
// paused agent answers the same.
func (c *Client) Pause(ctx context.Context, agentID string) (*PauseStatus, error) {
	var out PauseStatus
	err := c.retry(ctx, true, func() error {
		return c.do(ctx, http.MethodPost, expand(pathPause, agentID), c.appKey, nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Resume brings a paused agent back from its last checkpoint (checkpointID
// "") or the one named, with the same id and session token; it answers
// once the agent is ready.
func (c *Client) Resume(ctx context.Context, agentID, checkpointID string) (*PauseStatus, error) {
	var body []byte
	if checkpointID != "" {
		var err error
		if body, err = json.Marshal(schema.ResumeRequest{CheckpointID: checkpointID}); err != nil {
			return nil, err
		}
	}
	var out PauseStatus
	err := c.retry(ctx, true, func() error {
		return c.do(ctx, http.MethodPost, expand(pathResume, agentID), c.appKey, body, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Fork makes a new agent from the agent's last checkpoint, answered as
// Create answers; not retried (each fork is a new agent).
func (c *Client) Fork(ctx context.Context, agentID string) (*Agent, error) {
	var out Agent
	err := c.retry(ctx, false, func() error {
		return c.do(ctx, http.MethodPost, expand(pathFork, agentID), c.appKey, nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Checkpoints lists a page of the agent's checkpoints, oldest first
// (cursor: the previous page's NextCursor).
func (c *Client) Checkpoints(ctx context.Context, agentID, cursor string) (*CheckpointList, error) {
	path := expand(pathCheckpoints, agentID)
	if cursor != "" {
		path += "?cursor=" + url.QueryEscape(cursor)
	}
	var out CheckpointList
	err := c.retry(ctx, true, func() error {
		return c.do(ctx, http.MethodGet, path, c.appKey, nil, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}
