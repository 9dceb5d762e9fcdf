// Package events builds the events function: the SSE stream of an agent's
// events.
package events

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/eventsapi"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the events function.
func Build(_ context.Context, e *wiring.Env) (wiring.Function, error) {
	h := &eventsapi.Handlers{
		Sessions: session.NewStreams(session.StreamsOptions{Store: e.SessionStore(), Quotas: e.Quotas(), Log: e.Log}),
		Follower: eventsapi.Follower{Store: e.SessionStore(), Log: e.Log, MaxDuration: e.Config.EventsMaxDuration},
	}
	return wiring.Pick("events", h.Routes(e.Config.AllowedOrigins))
}
