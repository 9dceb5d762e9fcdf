// Package jobs defines the messages of the jobs queue and publishes them:
// session.start, session.stop and task.state (job.run and job.cancel come with the
// orchestrator jobs). jobworker consumes them.
package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/remote-agents/remote-agents/shared/queue"
)

// Type names a message.
type Type string

// The message types.
const (
	SessionStart Type = "session.start"
	SessionStop  Type = "session.stop"
	TaskState    Type = "task.state"
)

// Message is one jobs-queue message.
type Message struct {
	Type       Type   `json:"type"`
	SessionID  string `json:"session_id"`
	Generation int    `json:"generation"`
	// SandboxRef and ExitCode describe a stopped sandbox (task.state).
	SandboxRef string `json:"sandbox_ref,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// ErrMalformed: a message that can never be handled (poison).
var ErrMalformed = errors.New("malformed job message")

// Parse decodes and checks a message body.
func Parse(body string) (Message, error) {
	var m Message
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	switch m.Type {
	case SessionStart, SessionStop, TaskState:
	default:
		return m, fmt.Errorf("%w: unknown type %q", ErrMalformed, m.Type)
	}
	if m.SessionID == "" || len(m.SessionID) > 128 || m.Generation < 1 {
		return m, fmt.Errorf("%w: %s without session id and generation", ErrMalformed, m.Type)
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
