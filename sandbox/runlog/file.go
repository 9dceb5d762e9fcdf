package runlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/safefile"
)

// Files keeps one JSON file per session in a folder, each write atomic
// (temporary file, then rename).
type Files struct {
	dir string
	mu  sync.Mutex
}

var _ Store = (*Files)(nil)

type record struct {
	Session   Session    `json:"session"`
	Messages  []Message  `json:"messages"`
	ToolCalls []ToolCall `json:"tool_calls"`
}

// OpenFiles uses dir, creating it.
func OpenFiles(dir string) (*Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return &Files{dir: dir}, nil
}

func (f *Files) path(id string) string { return filepath.Join(f.dir, id+".json") }

func (f *Files) load(id string) (record, error) {
	var r record
	if err := validID(id); err != nil {
		return r, err
	}
	raw, err := os.ReadFile(f.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return r, fmt.Errorf("sessions: %w", err)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("sessions: %s is damaged: %w", f.path(id), err)
	}
	return r, nil
}

func (f *Files) save(r record) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	if err := safefile.Write(f.path(r.Session.ID), raw, 0o600); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	return nil
}

// change loads, edits and saves a record under the lock.
func (f *Files) change(id string, edit func(*record)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.load(id)
	if err != nil {
		return err
	}
	edit(&r)
	return f.save(r)
}

// Create stores a new session.
func (f *Files) Create(_ context.Context, s Session) error {
	if err := validID(s.ID); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := os.Stat(f.path(s.ID)); err == nil {
		return fmt.Errorf("sessions: %s exists", s.ID)
	}
	now := time.Now().UTC()
	s.CreatedAt, s.UpdatedAt = now, now
	return f.save(record{Session: s})
}

// Update replaces status, error and outputs.
func (f *Files) Update(_ context.Context, s Session) error {
	return f.change(s.ID, func(r *record) {
		r.Session.Status, r.Session.Error, r.Session.Outputs = s.Status, s.Error, s.Outputs
		r.Session.UpdatedAt = time.Now().UTC()
	})
}

// Get reads a session.
func (f *Files) Get(_ context.Context, id string) (Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.load(id)
	return r.Session, err
}

// AddMessage appends a message.
func (f *Files) AddMessage(_ context.Context, id string, m Message) error {
	return f.change(id, func(r *record) { r.Messages = append(r.Messages, m) })
}

// AddToolCall appends a tool call.
func (f *Files) AddToolCall(_ context.Context, id string, c ToolCall) error {
	return f.change(id, func(r *record) { r.ToolCalls = append(r.ToolCalls, c) })
}

// Messages reads a session's messages.
func (f *Files) Messages(_ context.Context, id string) ([]Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.load(id)
	return r.Messages, err
}

// ToolCalls reads a session's tool calls.
func (f *Files) ToolCalls(_ context.Context, id string) ([]ToolCall, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.load(id)
	return r.ToolCalls, err
}

// Close does nothing: every write is already on disk.
func (f *Files) Close() error { return nil }
