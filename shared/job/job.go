// Package job holds the orchestrator's jobs: one plan step run by one agent
// profile in one fresh sandbox (agent-runtime-service spec). A job moves
//
//	created → running → completed | failed | cancelled
//
// each transition one conditional write that also writes the transition's
// AGENT.JOB.* event to an outbox in the same transaction; the outbox is
// published (jobevents.Publisher) with the event's stable id, and emptied
// after, so every transition is published exactly once however often a
// publish is retried. Agent profiles (the spec's agents table) are here too.
// The package imports no AWS SDK: dynamo.Jobs stores it.
package job

import (
	"errors"
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Status is where a job is in its life.
type Status string

// The statuses.
const (
	Created   Status = "created"
	Running   Status = "running"
	Completed Status = "completed"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Terminal reports whether s is final.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Live lists the statuses a job may still leave.
var Live = []Status{Created, Running}

// Constraints are a job's optional limits (CreateJobDto.constraints).
type Constraints struct {
	// Timeout is in seconds.
	Timeout *int `json:"timeout,omitempty"`
	// Memory is in MiB.
	Memory  *int  `json:"memory,omitempty"`
	Network *bool `json:"network,omitempty"`
}

// Failure says why a job failed.
type Failure struct {
	Category sandboxwire.FailureCategory `json:"category"`
	Message  string                      `json:"message"`
}

// OutputType is what an output references (the spec's output_type).
type OutputType string

// The output types.
const (
	OutputFile    OutputType = "file"
	OutputVersion OutputType = "version"
	OutputThread  OutputType = "thread"
	OutputDataset OutputType = "dataset"
	OutputLog     OutputType = "log"
)

// Reference is where an uploaded file of a job is: an object of the bucket.
type Reference struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Path is the file's path in the job directory (output/report.md).
	Path string `json:"path,omitempty"`
}

// Output is one output reference (the spec's agent_outputs row).
type Output struct {
	ID        string     `json:"id"`
	JobID     string     `json:"job_id"`
	Type      OutputType `json:"output_type"`
	Reference Reference  `json:"reference"`
	CreatedAt time.Time  `json:"created_at"`
}

// MaxOutputs bounds the outputs one job records.
const MaxOutputs = 200

// Job is one orchestrator job (the spec's agent_jobs row, and what the
// platform keeps with it).
type Job struct {
	ID         string `json:"id"`
	CommandID  string `json:"command_id"`
	PlanStepID string `json:"plan_step_id"`
	AgentID    string `json:"agent_id"`
	IdentityID string `json:"identity_id"`
	ContextID  string `json:"context_id"`
	Status     Status `json:"status"`
	TokenLimit int64  `json:"token_limit"`
	TokensUsed int64  `json:"tokens_used"`
	// InputData is the job's inputData object, as sent.
	InputData   string       `json:"input_data"`
	Constraints *Constraints `json:"constraints,omitempty"`
	// RequestHash is the SHA-256 of the create request, to tell a replay of
	// the plan step's create from another request.
	RequestHash string   `json:"request_hash"`
	Failure     *Failure `json:"failure,omitempty"`
	// Alerted are the kinds of alert an AGENT.JOB.ALERT was published for.
	Alerted []string `json:"alerted,omitempty"`
	// Attempt counts the plan step's jobs: 1 for its first, then one more
	// for each retry (0 is read as 1); RetryOf is the job a retry re-runs.
	Attempt int      `json:"attempt,omitempty"`
	RetryOf string   `json:"retry_of,omitempty"`
	Outputs []Output `json:"outputs,omitempty"`
	// SessionID is the session of the job's sandbox, once job.run made it.
	SessionID  string    `json:"session_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Change is a transition: the statuses it may leave, the one it enters and
// what it sets alongside.
type Change struct {
	From []Status
	To   Status
	// Set when not zero.
	StartedAt  time.Time
	FinishedAt time.Time
	TokensUsed int64
	Failure    *Failure
	Outputs    []Output
	SessionID  string
	// ExpiresAt, if not zero, is when a finished job's item expires (Unix
	// seconds: the table's TTL).
	ExpiresAt int64
}

// Allows reports whether c may leave s.
func (c Change) Allows(s Status) bool { return slices.Contains(c.From, s) }

// Errors of the Store.
var (
	// ErrNotFound: no such job or profile.
	ErrNotFound = errors.New("job not found")
	// ErrConflict: the job was not in a status the change leaves; nothing
	// was written.
	ErrConflict = errors.New("job status conflict")
	// ErrStepTaken: the plan step has a job already.
	ErrStepTaken = errors.New("plan step has a job")
)

// Pending is an event of the outbox: written with its transition, published,
// then removed.
type Pending struct {
	JobID string
	// Seq orders a job's events (EventSeq).
	Seq   int
	Event jobevents.Event
	// Where is the store's own note of where it keeps the event, set by
	// Outbox for Published ("": where the store writes events now).
	Where string
}

// EventSeq is the place of an event type among a job's events: a job
// publishes each at most once, in this order.
func EventSeq(t jobevents.DetailType) int {
	switch t {
	case jobevents.Created:
		return 10
	case jobevents.Started:
		return 20
	case jobevents.OutputGenerated:
		return 30
	default:
		return 40 // the terminal one
	}
}

// alertKinds are the alerts a running job's view may carry, in the order
// of their events' sequence numbers (21…: after started, before the end).
var alertKinds = []string{"token_usage", "execution_time", "memory_usage", "rate_limit"}

// alertSeq is the sequence number of an alert's event.
func alertSeq(kind string) int { return 21 + slices.Index(alertKinds, kind) }
