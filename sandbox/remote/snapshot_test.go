package remote

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// TestSnapshotsLeaveOutTheSessionsOwnFiles runs a sandbox's save_snapshot
// against a gateway and bucket on httptest, and lists the archive it uploads:
// the workspace is there, the conversation (guardrails and all), the user's
// attachments, the env values, the agent's state and the platform's folder
// (the task file, the services' logs) are not.
func TestSnapshotsLeaveOutTheSessionsOwnFiles(t *testing.T) {
	// The env file is outside the workspace by default; a setting may move it in.
	const envInWorkspace = ".proliferate_env.json"
	ws := t.TempDir()
	files := map[string]string{
		"main.go":                        "package main",
		"src/attachments/kept.go":        "package attachments", // a folder of the project's, of the same name
		ConversationFile:                 `[{"role":"system","content":"# Rules"}]`,
		AttachmentsDir + "/1-notes.txt":  "the user's notes",
		envInWorkspace:                   `{"API_KEY":"secret"}`,
		".agent/memory.json":             "{}",
		sandboxwire.TaskFile:             `{"branch":"main"}`,
		".remote-agent/services/web.log": "serving",
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu       sync.Mutex
		uploaded []byte
		srv      *httptest.Server
	)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.Method + " " + r.URL.Path {
		case "POST /sandbox/s1/" + sandboxwire.RouteUploads:
			var in sandboxwire.UploadsRequest
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Files) != 1 {
				http.Error(w, "bad uploads request", http.StatusBadRequest)
				return
			}
			_ = json.NewEncoder(w).Encode(sandboxwire.UploadsResponse{Uploads: []sandboxwire.Upload{{
				Path: in.Files[0].Path, Key: "k", URL: srv.URL + "/bucket/snapshot",
				Headers: map[string]string{"Content-Type": in.Files[0].ContentType},
			}}})
		case "PUT /bucket/snapshot":
			uploaded, _ = io.ReadAll(r.Body)
		case "POST /proliferate/s1/tools/save_snapshot":
			_, _ = io.WriteString(w, `{"success":true,"result":"Snapshot saved."}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := Config{SessionID: "s1", Gateway: srv.URL, Token: "rsb_token", Workspace: ws,
		EnvFile: filepath.Join(ws, envInWorkspace), LLM: agentconfig.LLM{Provider: "scripted"}}
	r := &run{c: c, log: slog.New(slog.NewTextHandler(io.Discard, nil)), asked: &questions{},
		cl: gateway.New(srv.URL, c.SessionID, c.Token, c.Secrets)}
	brain, err := r.brain(sandboxwire.Spec{SessionType: "coding"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := brain.Tools.Run(t.Context(), llm.ToolCall{ID: "call-snap", Name: "save_snapshot", Args: json.RawMessage(`{}`)})
	if err != nil || res.IsError {
		t.Fatalf("save_snapshot: %+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	names := tarNames(t, uploaded)
	for _, want := range []string{"main.go", "src/attachments/kept.go"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s missing from the snapshot %v", want, names)
		}
	}
	for _, not := range []string{ConversationFile, AttachmentsDir, AttachmentsDir + "/1-notes.txt", envInWorkspace, ".agent", ".agent/memory.json",
		".remote-agent", sandboxwire.TaskFile, ".remote-agent/services/web.log"} {
		if slices.Contains(names, not) {
			t.Errorf("%s is in the snapshot %v", not, names)
		}
	}
}

// tarNames lists the entries of a gzipped tar.
func tarNames(t *testing.T, archive []byte) []string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("snapshot of %d bytes: %v", len(archive), err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}
