package runlog_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/sandbox/runlog"
)

// contract is the suite every Store passes.
func contract(t *testing.T, open func(t *testing.T) runlog.Store) {
	t.Run("lifecycle", func(t *testing.T) {
		t.Parallel()
		st := open(t)
		id := runlog.NewID()
		s := runlog.Session{ID: id, Workflow: "w", File: "Agentfile", Inputs: map[string]string{"topic": "Go"}, Status: runlog.Running, Outputs: map[string]string{}}
		if err := st.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		s.Outputs = map[string]string{"research": "facts"}
		if err := st.Update(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		s.Status, s.Error = runlog.Failed, "model unreachable"
		if err := st.Update(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		got, err := st.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Workflow != "w" || got.Inputs["topic"] != "Go" || got.Outputs["research"] != "facts" || got.Status != runlog.Failed ||
			got.Error != "model unreachable" || got.CreatedAt.IsZero() || got.UpdatedAt.Before(got.CreatedAt) {
			t.Errorf("session %+v", got)
		}
		if _, err := st.Get(t.Context(), runlog.NewID()); !errors.Is(err, runlog.ErrNotFound) {
			t.Errorf("unknown id: %v", err)
		}
		if _, err := st.Get(t.Context(), "../../etc/passwd"); !errors.Is(err, runlog.ErrNotFound) {
			t.Errorf("path as id: %v", err)
		}
		if err := st.Update(t.Context(), runlog.Session{ID: runlog.NewID()}); !errors.Is(err, runlog.ErrNotFound) {
			t.Errorf("update of unknown: %v", err)
		}
	})
	t.Run("messages and tool calls in order", func(t *testing.T) {
		t.Parallel()
		st := open(t)
		id := runlog.NewID()
		if err := st.Create(t.Context(), runlog.Session{ID: id, Workflow: "w", Status: runlog.Running}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				if err := st.AddMessage(t.Context(), id, runlog.Message{Goal: "g", Role: "user", Content: strings.Repeat("x", i), At: time.Now()}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := st.AddToolCall(t.Context(), id, runlog.ToolCall{Goal: "g", Tool: "read", Args: `{"path":"a"}`, Result: "text", At: time.Now(), Duration: 3 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if err := st.AddToolCall(t.Context(), id, runlog.ToolCall{Goal: "g", Agent: "critic", Tool: "bash", IsError: true, Result: "exit 1"}); err != nil {
			t.Fatal(err)
		}
		msgs, err := st.Messages(t.Context(), id)
		if err != nil || len(msgs) != 20 {
			t.Fatalf("%d messages, %v", len(msgs), err)
		}
		calls, err := st.ToolCalls(t.Context(), id)
		if err != nil || len(calls) != 2 || calls[0].Tool != "read" || calls[0].Duration != 3*time.Millisecond || !calls[1].IsError || calls[1].Agent != "critic" {
			t.Errorf("tool calls %+v, %v", calls, err)
		}
	})
}

func TestFiles(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T) runlog.Store {
		st, err := runlog.OpenFiles(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	contract(t, func(t *testing.T) runlog.Store {
		st, err := runlog.OpenSQLite(filepath.Join(t.TempDir(), "sessions.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

func TestFilesAreAtomicAndSurviveReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, _ := runlog.OpenFiles(dir)
	id := runlog.NewID()
	if err := st.Create(t.Context(), runlog.Session{ID: id, Workflow: "w", Status: runlog.Running}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		_ = st.AddMessage(t.Context(), id, runlog.Message{Role: "user", Content: strings.Repeat("y", i)})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != id+".json" {
		t.Errorf("folder holds %v, want one file and no temporaries", entries)
	}
	again, _ := runlog.OpenFiles(dir)
	if msgs, err := again.Messages(t.Context(), id); err != nil || len(msgs) != 10 {
		t.Errorf("after reopen: %d messages, %v", len(msgs), err)
	}
	db := filepath.Join(t.TempDir(), "s.db")
	sq, _ := runlog.OpenSQLite(db)
	_ = sq.Create(t.Context(), runlog.Session{ID: id, Workflow: "w", Status: runlog.Completed})
	_ = sq.Close()
	sq2, err := runlog.OpenSQLite(db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sq2.Close() }()
	if got, err := sq2.Get(t.Context(), id); err != nil || got.Status != runlog.Completed {
		t.Errorf("sqlite after reopen: %+v, %v", got, err)
	}
}

func TestNewID(t *testing.T) {
	a, b := runlog.NewID(), runlog.NewID()
	if a == b || len(a) != 32 || strings.ToLower(a) != a {
		t.Fatalf("ids %q, %q: want two different 32 lower-case hex digits", a, b)
	}
	if id, err := uuid.Parse(a); err != nil || id.Version() != 4 {
		t.Errorf("%q is not a version 4 UUID: %v", a, err)
	}
}
