// Package runlog persists workflow runs: the session (workflow, inputs, status,
// the outputs of completed goals), every message and every tool call with its
// timing. Two backends share one contract: SQLite (modernc.org/sqlite, no cgo)
// and one JSON file per session, written atomically. A failed or interrupted run
// resumes from its last completed goal.
package runlog

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Statuses of a session.
const (
	Running   = "running"
	Completed = "completed"
	Failed    = "failed"
)

// ErrNotFound: no session has that id.
var ErrNotFound = errors.New("session not found")

// Session is one run of a workflow.
type Session struct {
	ID       string            `json:"id"`
	Workflow string            `json:"workflow"`
	File     string            `json:"file"`
	Inputs   map[string]string `json:"inputs"`
	Status   string            `json:"status"`
	Error    string            `json:"error,omitempty"`
	// Outputs hold the results of completed goals: the state a resume starts from.
	Outputs   map[string]string `json:"outputs"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// Message is one message of a goal conversation.
type Message struct {
	Goal    string    `json:"goal"`
	Agent   string    `json:"agent,omitempty"`
	Role    string    `json:"role"`
	Content string    `json:"content"`
	At      time.Time `json:"at"`
}

// ToolCall is one tool call with its result and timing.
type ToolCall struct {
	Goal     string        `json:"goal"`
	Agent    string        `json:"agent,omitempty"`
	Tool     string        `json:"tool"`
	Args     string        `json:"args"`
	Result   string        `json:"result"`
	IsError  bool          `json:"is_error"`
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"duration_ns"`
}

// Store persists sessions.
type Store interface {
	// Create stores a new session.
	Create(ctx context.Context, s Session) error
	// Update replaces a session's status, error and outputs. ErrNotFound if absent.
	Update(ctx context.Context, s Session) error
	// Get reads a session. ErrNotFound if absent.
	Get(ctx context.Context, id string) (Session, error)
	// AddMessage and AddToolCall append to a session's record.
	AddMessage(ctx context.Context, sessionID string, m Message) error
	AddToolCall(ctx context.Context, sessionID string, c ToolCall) error
	// Messages and ToolCalls read them back in order.
	Messages(ctx context.Context, sessionID string) ([]Message, error)
	ToolCalls(ctx context.Context, sessionID string) ([]ToolCall, error)
	Close() error
}

// Open returns the store kind ("sqlite" or "file") at path.
func Open(kind, path string) (Store, error) {
	switch kind {
	case "sqlite":
		return OpenSQLite(path)
	case "file", "":
		return OpenFiles(path)
	default:
		return nil, fmt.Errorf("sessions: unknown store %q (want sqlite or file)", kind)
	}
}

// NewID returns a random session id: a UUID (version 4) as 32 hex digits, the
// form session files have always been named by.
func NewID() string {
	id := uuid.New()
	return hex.EncodeToString(id[:])
}

// validID accepts the ids NewID makes, so an id can never name another path.
func validID(id string) error {
	if len(id) != 32 {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if _, err := hex.DecodeString(id); err != nil {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return nil
}
