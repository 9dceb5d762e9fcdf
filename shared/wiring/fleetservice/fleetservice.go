// Package fleetservice builds the fleet service over an Env: what the fleet
// function and the sandbox API's (e2b) share, without either's handlers.
package fleetservice

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/fleet"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Service is the fleet service over e: kills, pauses and resumes of an
// app's agents (the sandbox API's sandboxes too).
func Service(ctx context.Context, e *wiring.Env) (*fleet.Service, error) {
	jobs, err := e.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	return fleet.New(fleet.Options{
		// A kill's stop is pushed to the sandbox at once.
		Store:       session.Pushing(e.SessionStore(), e.Notifier(), e.Log),
		Keys:        e.Registry(),
		Jobs:        jobs,
		Limits:      e.Limits(),
		Checkpoints: e.Checkpoints(),
		Wait:        e.Config.CreationTimeout,
		Log:         e.Log,
	}), nil
}
