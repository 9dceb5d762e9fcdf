package runlog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver
)

// SQLite keeps sessions in one SQLite database: sessions, messages, tool_calls.
type SQLite struct {
	db *sql.DB
}

var _ Store = (*SQLite)(nil)

const schema = `
CREATE TABLE IF NOT EXISTS sessions (
	id         TEXT PRIMARY KEY,
	workflow   TEXT NOT NULL,
	file       TEXT NOT NULL,
	inputs     TEXT NOT NULL,
	status     TEXT NOT NULL,
	error      TEXT NOT NULL DEFAULT '',
	outputs    TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
	session_id TEXT NOT NULL REFERENCES sessions(id),
	seq        INTEGER NOT NULL,
	goal       TEXT NOT NULL,
	agent      TEXT NOT NULL,
	role       TEXT NOT NULL,
	content    TEXT NOT NULL,
	at         TEXT NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS tool_calls (
	session_id  TEXT NOT NULL REFERENCES sessions(id),
	seq         INTEGER NOT NULL,
	goal        TEXT NOT NULL,
	agent       TEXT NOT NULL,
	tool        TEXT NOT NULL,
	args        TEXT NOT NULL,
	result      TEXT NOT NULL,
	is_error    INTEGER NOT NULL,
	at          TEXT NOT NULL,
	duration_ns INTEGER NOT NULL,
	PRIMARY KEY (session_id, seq)
);`

// OpenSQLite opens (creating) the database at path and its schema.
func OpenSQLite(path string) (*SQLite, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises anyway
	if _, err := db.Exec(schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sessions: schema: %w", err)
	}
	return &SQLite{db: db}, nil
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTS(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// Create stores a new session.
func (s *SQLite) Create(ctx context.Context, ses Session) error {
	if err := validID(ses.ID); err != nil {
		return err
	}
	inputs, _ := json.Marshal(ses.Inputs)
	outputs, _ := json.Marshal(ses.Outputs)
	now := ts(time.Now())
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions (id, workflow, file, inputs, status, error, outputs, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, ses.ID, ses.Workflow, ses.File, string(inputs), ses.Status, ses.Error, string(outputs), now, now)
	if err != nil {
		return fmt.Errorf("sessions: create %s: %w", ses.ID, err)
	}
	return nil
}

// Update replaces status, error and outputs.
func (s *SQLite) Update(ctx context.Context, ses Session) error {
	outputs, _ := json.Marshal(ses.Outputs)
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET status = ?, error = ?, outputs = ?, updated_at = ? WHERE id = ?`,
		ses.Status, ses.Error, string(outputs), ts(time.Now()), ses.ID)
	if err != nil {
		return fmt.Errorf("sessions: update %s: %w", ses.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %s", ErrNotFound, ses.ID)
	}
	return nil
}

// Get reads a session.
func (s *SQLite) Get(ctx context.Context, id string) (Session, error) {
	var ses Session
	var inputs, outputs, created, updated string
	err := s.db.QueryRowContext(ctx, `SELECT id, workflow, file, inputs, status, error, outputs, created_at, updated_at FROM sessions WHERE id = ?`, id).
		Scan(&ses.ID, &ses.Workflow, &ses.File, &inputs, &ses.Status, &ses.Error, &outputs, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return ses, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return ses, fmt.Errorf("sessions: get %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(inputs), &ses.Inputs); err != nil {
		return ses, fmt.Errorf("sessions: %s inputs: %w", id, err)
	}
	if err := json.Unmarshal([]byte(outputs), &ses.Outputs); err != nil {
		return ses, fmt.Errorf("sessions: %s outputs: %w", id, err)
	}
	ses.CreatedAt, ses.UpdatedAt = parseTS(created), parseTS(updated)
	return ses, nil
}

// AddMessage appends a message.
func (s *SQLite) AddMessage(ctx context.Context, id string, m Message) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO messages (session_id, seq, goal, agent, role, content, at)
		VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?), ?, ?, ?, ?, ?)`,
		id, id, m.Goal, m.Agent, m.Role, m.Content, ts(m.At))
	if err != nil {
		return fmt.Errorf("sessions: message of %s: %w", id, err)
	}
	return nil
}

// AddToolCall appends a tool call.
func (s *SQLite) AddToolCall(ctx context.Context, id string, c ToolCall) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO tool_calls (session_id, seq, goal, agent, tool, args, result, is_error, at, duration_ns)
		VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM tool_calls WHERE session_id = ?), ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, id, c.Goal, c.Agent, c.Tool, c.Args, c.Result, c.IsError, ts(c.At), int64(c.Duration))
	if err != nil {
		return fmt.Errorf("sessions: tool call of %s: %w", id, err)
	}
	return nil
}

// Messages reads a session's messages in order.
func (s *SQLite) Messages(ctx context.Context, id string) ([]Message, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT goal, agent, role, content, at FROM messages WHERE session_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("sessions: messages of %s: %w", id, err)
	}
	defer func() { _ = rows.Close() }()
	var out []Message
	for rows.Next() {
		var m Message
		var at string
		if err := rows.Scan(&m.Goal, &m.Agent, &m.Role, &m.Content, &at); err != nil {
			return nil, fmt.Errorf("sessions: messages of %s: %w", id, err)
		}
		m.At = parseTS(at)
		out = append(out, m)
	}
	return out, rows.Err()
}

// ToolCalls reads a session's tool calls in order.
func (s *SQLite) ToolCalls(ctx context.Context, id string) ([]ToolCall, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT goal, agent, tool, args, result, is_error, at, duration_ns FROM tool_calls WHERE session_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("sessions: tool calls of %s: %w", id, err)
	}
	defer func() { _ = rows.Close() }()
	var out []ToolCall
	for rows.Next() {
		var c ToolCall
		var at string
		var dur int64
		if err := rows.Scan(&c.Goal, &c.Agent, &c.Tool, &c.Args, &c.Result, &c.IsError, &at, &dur); err != nil {
			return nil, fmt.Errorf("sessions: tool calls of %s: %w", id, err)
		}
		c.At, c.Duration = parseTS(at), time.Duration(dur)
		out = append(out, c)
	}
	return out, rows.Err()
}

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }
