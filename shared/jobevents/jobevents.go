// Package jobevents is the contract of the orchestrator jobs' events: the
// AGENT.JOB.* detail types, the payload the orchestrator reads (the spec's
// event payload), the EventBridge envelope it arrives in, and the Publisher
// every transport implements (EventBridge on AWS and LocalStack, the
// orchestrator queue itself on the bundled emulators).
package jobevents

import (
	"context"
	"encoding/json"
	"time"
)

// DetailType names a job event (the envelope's detail-type).
type DetailType string

// The job events, one per transition of a job.
const (
	Created         DetailType = "AGENT.JOB.CREATED"
	Started         DetailType = "AGENT.JOB.STARTED"
	OutputGenerated DetailType = "AGENT.JOB.OUTPUT.GENERATED"
	Completed       DetailType = "AGENT.JOB.COMPLETED"
	Failed          DetailType = "AGENT.JOB.FAILED"
	Cancelled       DetailType = "AGENT.JOB.CANCELLED"
	// Alert: a running job came close to one of its limits (tokens, time,
	// memory) or its model provider limits its calls; once per kind of
	// alert and job.
	Alert DetailType = "AGENT.JOB.ALERT"
)

// Source is the envelope's source: the service that publishes job events.
const Source = "remote-agents.jobs"

// BusName is the name of an environment's job event bus.
func BusName(env string) string { return "ra-" + env + "-jobs" }

// Detail is an event's payload, exactly the spec's fields.
type Detail struct {
	JobID      string    `json:"jobId"`
	CommandID  string    `json:"commandId"`
	AgentID    string    `json:"agentId"`
	IdentityID string    `json:"identityId"`
	ContextID  string    `json:"contextId"`
	Status     string    `json:"status"`
	Timestamp  string    `json:"timestamp"`
	Metadata   *Metadata `json:"metadata,omitempty"`
	// Alert, on AGENT.JOB.ALERT, is which limit the job is close to
	// (token_usage, execution_time, memory_usage, rate_limit) and what.
	Alert *AlertDetail `json:"alert,omitempty"`
}

// AlertDetail is an alert's kind and message.
type AlertDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Metadata is the optional part of a payload.
type Metadata struct {
	TokensUsed *int64 `json:"tokensUsed,omitempty"`
	Outputs    *int   `json:"outputs,omitempty"`
	// Duration is in milliseconds.
	Duration *int64 `json:"duration,omitempty"`
	// Failure, on AGENT.JOB.FAILED, is why: the failure category and its
	// message, as the job's own failure says.
	Failure *Failure `json:"failure,omitempty"`
}

// Failure is a failed job's category (timeout, token_limit, memory_limit,
// rate_limit, crash, policy_violation) and message.
type Failure struct {
	Category string `json:"category"`
	Message  string `json:"message"`
}

// Event is one event to publish. ID is stable for a transition (the job id
// and the transition), so a publish retried after a crash carries the same id
// and the orchestrator can drop the copy.
type Event struct {
	ID     string
	Type   DetailType
	Time   time.Time
	Detail Detail
}

// Envelope is the EventBridge event as a rule's SQS target delivers it; the
// queue publisher of the bundled emulators writes the same bytes.
type Envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType DetailType      `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// Publisher puts job events on the bus. A nil error means the bus took every
// event; Publish may be called again with the same events after a failure.
type Publisher interface {
	Publish(ctx context.Context, events ...Event) error
}
