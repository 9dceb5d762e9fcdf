// Package joblogs builds the joblogs function: a job's log followed live,
// for the orchestrator's role only (RA_ORCHESTRATOR_ROLE_ARN).
package joblogs

import (
	"context"
	"errors"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/eventsapi"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/joblogapi"
	"github.com/remote-agents/remote-agents/shared/orchestratorapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the joblogs function.
func Build(_ context.Context, e *wiring.Env) (wiring.Function, error) {
	if e.Config.OrchestratorRoleARN == "" {
		return wiring.Function{}, errors.New("joblogs needs the orchestrator's role (RA_ORCHESTRATOR_ROLE_ARN)")
	}
	// Reads only: the jobs and their sessions' events.
	jobs := job.New(job.Options{Store: dynamo.NewJobs(e.DynamoDB(), e.Resources.Jobs.Name, e.Resources.Registry.Name), Sessions: e.SessionStore(), Log: e.Log})
	h := &joblogapi.Handlers{
		Admit:  &orchestratorapi.Handlers{Caller: e.Config.OrchestratorRoleARN, Log: e.Log},
		Jobs:   jobs,
		Follow: eventsapi.Follower{Store: e.SessionStore(), Log: e.Log, MaxDuration: e.Config.EventsMaxDuration},
		Log:    e.Log,
	}
	return wiring.Pick("joblogs", h.Routes())
}
