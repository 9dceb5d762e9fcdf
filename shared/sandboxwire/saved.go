package sandboxwire

import (
	"path"
	"strings"
	"time"
)

// SavedConfiguration is what the session's configuration saved in its setup
// sessions, which the sandbox brings back while it provisions, after the
// clone and before the setup commands and ready, in this order: the
// snapshot restored into the workspace, the env files written, then (after
// the setup commands) the service commands started. Nil: the session has no
// configuration, or it saved nothing.
type SavedConfiguration struct {
	// Snapshot is the configuration's latest save_snapshot archive.
	Snapshot *SavedSnapshot `json:"snapshot,omitempty"`
	// EnvFiles are the env files save_env_files described, written from the
	// values users persisted for the configuration (Spec.Env).
	EnvFiles []SavedEnvFile `json:"env_files,omitempty"`
	// Services are the commands save_service_commands saved, each started in
	// the workspace (locally in a tmux window of its own).
	Services []SavedService `json:"services,omitempty"`
}

// SavedSnapshot is a workspace archive to restore: a gzipped tar of the
// workspace as save_snapshot uploaded it, read from URL (presigned, valid
// for SnapshotURLTTL).
type SavedSnapshot struct {
	URL       string    `json:"url"`
	SizeBytes int64     `json:"size_bytes"`
	SavedAt   time.Time `json:"saved_at"`
}

// SavedEnvFile is one env file to write: Path (relative to the workspace,
// its workspacePath already joined), in Format (dotenv), with Keys.
type SavedEnvFile struct {
	Path   string        `json:"path"`
	Format string        `json:"format"`
	Keys   []SavedEnvKey `json:"keys"`
}

// SavedEnvKey is one key of an env file; a Required key without a value is
// a warning.
type SavedEnvKey struct {
	Key      string `json:"key"`
	Required bool   `json:"required"`
}

// SavedService is one service command: Name (its tmux window's), Command
// (run by bash) and Cwd (relative to the workspace; "" is the workspace).
type SavedService struct {
	Name    string `json:"name"`
	Command string `json:"command"`
	Cwd     string `json:"cwd,omitempty"`
}

// Limits of a restore: the archive (compressed) is at most
// MaxSnapshotBytes; what it unpacks to at most MaxRestoreBytes in at most
// MaxRestoreEntries entries.
const (
	SnapshotURLTTL    = time.Hour
	MaxRestoreBytes   = 4 * MaxSnapshotBytes
	MaxRestoreEntries = 500_000
)

// EnvFormatDotenv is the one env file format.
const EnvFormatDotenv = "dotenv"

// WorkspacePath joins a configuration's workspacePath and a path relative
// to it into a path relative to the workspace; ok is false when either is
// absolute or the result leaves the workspace.
func WorkspacePath(workspacePath, rel string) (string, bool) {
	if path.IsAbs(workspacePath) || path.IsAbs(rel) {
		return "", false
	}
	p := path.Clean(path.Join(workspacePath, rel))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	return p, true
}

// The provisioning events of a saved configuration.
const (
	TypeWorkspaceRestoring = "workspace.restoring"
	TypeWorkspaceEnvFiles  = "workspace.env_files"
	TypeWorkspaceServices  = "workspace.services"
)

// WorkspaceRestoring: the configuration's snapshot (SizeBytes, saved at
// SavedAt) is being restored into the workspace.
type WorkspaceRestoring struct {
	SizeBytes int64     `json:"size_bytes"`
	SavedAt   time.Time `json:"saved_at"`
}

// EventType implements Payload.
func (WorkspaceRestoring) EventType() string { return TypeWorkspaceRestoring }

// WorkspaceEnvFiles: the env files are being written; each names its keys
// (never a value).
type WorkspaceEnvFiles struct {
	Files []EnvFileKeys `json:"files"`
}

// EnvFileKeys is one env file and the names of its keys.
type EnvFileKeys struct {
	Path string   `json:"path"`
	Keys []string `json:"keys"`
}

// EventType implements Payload.
func (WorkspaceEnvFiles) EventType() string { return TypeWorkspaceEnvFiles }

// WorkspaceServices: the service commands are being started.
type WorkspaceServices struct {
	Services []SavedService `json:"services"`
}

// EventType implements Payload.
func (WorkspaceServices) EventType() string { return TypeWorkspaceServices }
