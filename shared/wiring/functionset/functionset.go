// Package functionset holds every function's constructor, by its name in
// package routes: the dev server builds them all in one process from it.
// A Lambda binary imports its own function's package instead, and links no
// other function's code.
package functionset

import (
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/agenttypes"
	"github.com/remote-agents/remote-agents/shared/wiring/alive"
	"github.com/remote-agents/remote-agents/shared/wiring/create"
	"github.com/remote-agents/remote-agents/shared/wiring/e2b"
	"github.com/remote-agents/remote-agents/shared/wiring/embed"
	"github.com/remote-agents/remote-agents/shared/wiring/events"
	"github.com/remote-agents/remote-agents/shared/wiring/fleet"
	"github.com/remote-agents/remote-agents/shared/wiring/joblogs"
	"github.com/remote-agents/remote-agents/shared/wiring/jobs"
	"github.com/remote-agents/remote-agents/shared/wiring/jobworker"
	"github.com/remote-agents/remote-agents/shared/wiring/messages"
	"github.com/remote-agents/remote-agents/shared/wiring/model"
	"github.com/remote-agents/remote-agents/shared/wiring/sandbox"
	"github.com/remote-agents/remote-agents/shared/wiring/shutdown"
	"github.com/remote-agents/remote-agents/shared/wiring/toolcallback"
	"github.com/remote-agents/remote-agents/shared/wiring/webhooks"
	"github.com/remote-agents/remote-agents/shared/wiring/workspace"
)

// Builders returns every function's constructor by its name in package
// routes.
func Builders() map[string]wiring.Builder {
	return map[string]wiring.Builder{
		"create":         create.Build,
		"agenttypes":     agenttypes.Build,
		"fleet":          fleet.Build,
		"alive":          alive.Build,
		"shutdown":       shutdown.Build,
		"messages":       messages.Build,
		"workspace":      workspace.Build,
		"events":         events.Build,
		"embed":          embed.Build,
		"toolcallback":   toolcallback.Build,
		"sandbox":        sandbox.Build,
		"model":          model.Build,
		"jobs":           jobs.Build,
		"joblogs":        joblogs.Build,
		"e2b":            e2b.Build,
		routes.JobWorker: jobworker.Build,
		routes.Webhooks:  webhooks.Build,
	}
}
