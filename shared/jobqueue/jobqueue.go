// Package jobqueue defines the messages of the jobs queue and publishes them:
// session.start, session.stop, task.state and task.running, and the orchestrator jobs' job.run
// and job.cancel. jobworker consumes them.
package jobqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/queue"
)

// Type names a message.
type Type string

// The message types.
const (
	SessionStart Type = "session.start"
	SessionStop  Type = "session.stop"
	// SessionExpire ends (or pauses) a sandbox of the sandbox API at its
	// end, At: sent delayed, and sent again while the end is further off
	// than a queue delays (MaxDelay).
	SessionExpire Type = "session.expire"
	TaskState     Type = "task.state"
	// TaskRunning says a sandbox task runs, at its private address (Addr):
	// where the egress proxy knows it from.
	TaskRunning Type = "task.running"
	// Sweep asks jobworker to end the sessions nobody would otherwise end
	// (session.Sweeper.Sweep): a schedule sends it (an EventBridge rule on
	// AWS, a ticker in the dev server). It names no session.
	Sweep Type = "sweep"
	// JobRun runs an orchestrator job (JobID) in a sandbox of its own.
	JobRun Type = "job.run"
	// JobCancel stops the sandbox of a cancelled job (JobID).
	JobCancel Type = "job.cancel"
	// JobSweep sweeps the jobs (a schedule sends it): the outbox's
	// leftovers, running jobs whose sandbox is gone.
	JobSweep Type = "job.sweep"
)

// Message is one jobs-queue message.
type Message struct {
	Type       Type   `json:"type"`
	SessionID  string `json:"session_id,omitempty"`
	Generation int    `json:"generation,omitempty"`
	// JobID is the orchestrator job of job.run and job.cancel.
	JobID string `json:"job_id,omitempty"`
	// SandboxRef and ExitCode describe a stopped sandbox (task.state).
	SandboxRef string `json:"sandbox_ref,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Detail     string `json:"detail,omitempty"`
	// Addr is a sandbox task's private IP address (task.running, and
	// task.state where the event had it).
	Addr string `json:"addr,omitempty"`
	// At is the end a session.expire is for, in Unix milliseconds: one
	// whose session's end moved since is over.
	At int64 `json:"at,omitempty"`
}

// MaxDelay is the longest an SQS message can be delayed.
const MaxDelay = 15 * time.Minute

// ExpireAt is the session.expire of session id (generation gen) for its
// end at, and how long to delay it from now: until at (rounded up to the
// whole second queues count delays in, so it never comes early), or
// MaxDelay.
func ExpireAt(id string, gen int, at, now time.Time) (Message, time.Duration) {
	d := max(at.Sub(now), 0)
	d = min((d + time.Second - 1).Truncate(time.Second), MaxDelay)
	return Message{Type: SessionExpire, SessionID: id, Generation: max(gen, 1), At: at.UnixMilli()}, d
}

// Errors of Parse.
var (
	// ErrMalformed: a message that can never be handled (poison).
	ErrMalformed = errors.New("malformed job message")
	// ErrIgnored: a well-formed message that needs nothing (an ECS task event of
	// a state other than STOPPED, or of a task that is not a sandbox).
	ErrIgnored = errors.New("job message needs no handling")
)

// ecsEvent is the EventBridge "ECS Task State Change" event, which the jobs queue
// receives as is.
type ecsEvent struct {
	DetailType string `json:"detail-type"`
	Source     string `json:"source"`
	Detail     struct {
		TaskArn       string `json:"taskArn"`
		LastStatus    string `json:"lastStatus"`
		StartedBy     string `json:"startedBy"`
		Group         string `json:"group"`
		StoppedReason string `json:"stoppedReason"`
		Attachments   []struct {
			Type    string `json:"type"`
			Details []struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"details"`
		} `json:"attachments"`
		Containers []struct {
			ExitCode *int   `json:"exitCode"`
			Reason   string `json:"reason"`
		} `json:"containers"`
	} `json:"detail"`
}

// ECSTaskStateChange is the detail-type of ECS task events.
const ECSTaskStateChange = "ECS Task State Change"

// ECSGroupPrefix starts the task group of a sandbox task: "ra-gen-<generation>".
const ECSGroupPrefix = "ra-gen-"

// Parse decodes and checks a message body: one of ours, or an ECS task event.
func Parse(body string) (Message, error) {
	var probe struct {
		DetailType string `json:"detail-type"`
	}
	if err := json.Unmarshal([]byte(body), &probe); err == nil && probe.DetailType != "" {
		return parseECS(body)
	}
	var m Message
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	switch m.Type {
	case SessionStart, SessionStop, TaskState, TaskRunning:
	case SessionExpire:
		if m.At <= 0 {
			return m, fmt.Errorf("%w: session.expire without its end", ErrMalformed)
		}
	case Sweep:
		if m.SessionID != "" || m.JobID != "" || m.Generation != 0 || m.SandboxRef != "" || m.ExitCode != nil || m.Detail != "" {
			return m, fmt.Errorf("%w: sweep names no session", ErrMalformed)
		}
		return m, nil
	case JobSweep:
		if m.JobID != "" || m.SessionID != "" {
			return m, fmt.Errorf("%w: %s names no job", ErrMalformed, m.Type)
		}
		return m, nil
	case JobRun, JobCancel:
		if m.JobID == "" || len(m.JobID) > 64 || m.SessionID != "" {
			return m, fmt.Errorf("%w: %s without a job id", ErrMalformed, m.Type)
		}
		return m, nil
	default:
		return m, fmt.Errorf("%w: unknown type %q", ErrMalformed, m.Type)
	}
	if m.SessionID == "" || len(m.SessionID) > 128 || m.Generation < 1 {
		return m, fmt.Errorf("%w: %s without session id and generation", ErrMalformed, m.Type)
	}
	return m, nil
}

func parseECS(body string) (Message, error) {
	var ev ecsEvent
	if err := json.Unmarshal([]byte(body), &ev); err != nil || ev.DetailType != ECSTaskStateChange || ev.Source != "aws.ecs" {
		return Message{}, fmt.Errorf("%w: unexpected event %q", ErrMalformed, ev.DetailType)
	}
	d := ev.Detail
	gen, err := strconv.Atoi(strings.TrimPrefix(d.Group, ECSGroupPrefix))
	if !strings.HasPrefix(d.Group, ECSGroupPrefix) || err != nil || gen < 1 || d.StartedBy == "" {
		return Message{}, fmt.Errorf("%w: task %s is not a sandbox", ErrIgnored, d.TaskArn)
	}
	addr := ""
	for _, a := range d.Attachments {
		for _, kv := range a.Details {
			// The task's ENI ("eni" in events, "ElasticNetworkInterface" in
			// DescribeTasks).
			if (a.Type == "eni" || a.Type == "ElasticNetworkInterface") && kv.Name == "privateIPv4Address" {
				if ip, err := netip.ParseAddr(kv.Value); err == nil {
					addr = ip.String()
				}
			}
		}
	}
	if d.LastStatus == "RUNNING" && addr != "" {
		return Message{Type: TaskRunning, SessionID: d.StartedBy, Generation: gen, SandboxRef: d.TaskArn, Addr: addr}, nil
	}
	if d.LastStatus != "STOPPED" {
		return Message{}, fmt.Errorf("%w: task %s is %s", ErrIgnored, d.TaskArn, d.LastStatus)
	}
	m := Message{Type: TaskState, SessionID: d.StartedBy, Generation: gen, SandboxRef: d.TaskArn, Detail: d.StoppedReason, Addr: addr}
	if len(d.Containers) > 0 {
		m.ExitCode = d.Containers[0].ExitCode
		// The container's reason says what the task's does not: an OOM kill.
		if r := d.Containers[0].Reason; r != "" {
			m.Detail = strings.TrimPrefix(m.Detail+"; "+r, "; ")
		}
	}
	return m, nil
}

// Publisher sends messages on the jobs queue.
type Publisher struct {
	q queue.Queue
}

// NewPublisher returns a publisher on q.
func NewPublisher(q queue.Queue) *Publisher {
	return &Publisher{q: q}
}

// Publish sends m, delivered after delay.
func (p *Publisher) Publish(ctx context.Context, m Message, delay time.Duration) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.Type, err)
	}
	if _, err := p.q.Send(ctx, string(body), delay); err != nil {
		return fmt.Errorf("publish %s for %s: %w", m.Type, m.SessionID, err)
	}
	return nil
}
