package sandboxchannel

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// JobRuns is what the sandbox channel asks and tells of orchestrator jobs
// (job.Service).
type JobRuns interface {
	// Spec is the job's JobSpec and the tools its sandbox registers.
	Spec(ctx context.Context, jobID string) (sandboxwire.JobSpec, []string, error)
	// Started: the job's sandbox reported it runs.
	Started(ctx context.Context, jobID string) error
	// Finished: the job's sandbox reported its end, with its job report
	// (nil: none).
	Finished(ctx context.Context, jobID string, rep *sandboxwire.JobReport) error
	// Alert publishes the job's alerts not published yet, with its
	// sandbox's session as a heartbeat left it (job.Service.Alert).
	Alert(ctx context.Context, jobID string, sess session.Session) error
}
