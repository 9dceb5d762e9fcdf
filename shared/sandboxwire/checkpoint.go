package sandboxwire

import (
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"
)

// Checkpoints: what a sandbox saves so that its agent can go on in another
// sandbox (pause and resume, fork). A checkpoint is its workspace's files
// and the agent's own state, in content-addressed chunks: a chunk is stored
// under its SHA-256, once per agent, so a file unchanged since the last
// checkpoint costs nothing. The sandbox uploads the chunks the platform
// lacks (RouteCheckpointUploads: presigned PUTs that carry the chunk's
// checksum, so the store refuses other bytes), then the manifest, itself a
// chunk, then commits it (RouteCheckpoints): the platform verifies every
// chunk it names before it records the checkpoint, and only then may the
// sandbox stop. A sandbox killed midway leaves the last committed
// checkpoint as it was.
const (
	// RouteCheckpointUploads presigns the uploads of chunks
	// (CheckpointUploadsRequest → CheckpointUploadsResponse).
	RouteCheckpointUploads = "checkpoints/uploads"
	// RouteCheckpointDownloads presigns the downloads of chunks of the
	// session's checkpoints (CheckpointDownloadsRequest →
	// CheckpointDownloadsResponse).
	RouteCheckpointDownloads = "checkpoints/downloads"
	// RouteCheckpoints commits a checkpoint (CheckpointCommit →
	// Checkpoint).
	RouteCheckpoints = "checkpoints"
)

// Bounds of checkpoints.
const (
	// ChunkSize is the most a chunk holds: a file is cut into chunks of
	// ChunkSize, its last one shorter.
	ChunkSize = 4 << 20
	// MaxManifestBytes bounds a manifest (its own chunk may be larger than
	// ChunkSize).
	MaxManifestBytes = 64 << 20
	// MaxChunksPerRequest bounds the chunks one uploads or downloads
	// request names.
	MaxChunksPerRequest = 1000
	// MaxCheckpointEntries bounds a manifest's files, folders and links.
	MaxCheckpointEntries = MaxRestoreEntries
	// MaxCheckpointBytes bounds what a checkpoint's files and state hold.
	MaxCheckpointBytes = 20 << 30
	// MaxStateBytes bounds the agent's state.
	MaxStateBytes = 64 << 20
	// CheckpointURLTTL is how long a presigned chunk upload or download
	// works.
	CheckpointURLTTL = time.Hour
	// ManifestVersion is the version of the manifests written now.
	ManifestVersion = 1
)

// Chunk names a chunk: the hex SHA-256 of its bytes, and how many.
type Chunk struct {
	Hash string `json:"hash"`
	Size int64  `json:"size"`
}

// Problem is what is wrong with c as a chunk of at most max bytes ("": nothing).
func (c Chunk) Problem(max int64) string {
	if !ValidHash(c.Hash) {
		return fmt.Sprintf("chunk hash %q is not 64 lowercase hex digits", c.Hash)
	}
	if c.Size < 0 || c.Size > max {
		return fmt.Sprintf("chunk %s has size %d, outside 0..%d", c.Hash, c.Size, max)
	}
	return ""
}

// ValidHash reports whether h is a hex SHA-256 as chunks are named: 64
// lowercase hex digits.
func ValidHash(h string) bool {
	if len(h) != 64 || strings.ToLower(h) != h {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// CheckpointUploadsRequest asks for the uploads of Chunks (1 to
// MaxChunksPerRequest): data chunks of at most ChunkSize, or a manifest.
type CheckpointUploadsRequest struct {
	Chunks []Chunk `json:"chunks"`
}

// CheckpointUploadsResponse has one upload per chunk asked for, in order.
type CheckpointUploadsResponse struct {
	Uploads []ChunkTransfer `json:"uploads"`
}

// ChunkTransfer is where a chunk goes or comes from: a PUT (with Headers,
// exactly: they are signed, the length and checksum among them) or a GET
// of URL, valid for CheckpointURLTTL.
type ChunkTransfer struct {
	Hash    string            `json:"hash"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// CheckpointDownloadsRequest asks for the downloads of chunks of the
// session's checkpoints, by hash (1 to MaxChunksPerRequest).
type CheckpointDownloadsRequest struct {
	Hashes []string `json:"hashes"`
}

// CheckpointDownloadsResponse has one download per hash asked for, in order.
type CheckpointDownloadsResponse struct {
	Downloads []ChunkTransfer `json:"downloads"`
}

// CheckpointCommit commits the checkpoint whose manifest (a Manifest,
// JSON) was uploaded as the chunk Manifest. Reason says what it is for
// (the CheckpointReasons).
type CheckpointCommit struct {
	Manifest Chunk  `json:"manifest"`
	Reason   string `json:"reason"`
}

// ReasonCheckpointFailed is what a sandbox whose checkpoint for a pause
// failed reports with idle (POST status): the session was not paused and
// the agent goes on.
const ReasonCheckpointFailed Reason = "checkpoint_failed"

// Why a checkpoint is made.
const (
	CheckpointPause    = "pause"
	CheckpointPeriodic = "periodic"
	CheckpointShutdown = "shutdown"
)

// CheckpointReasons are the reasons a commit may give.
var CheckpointReasons = []string{CheckpointPause, CheckpointPeriodic, CheckpointShutdown}

// Checkpoint is a committed checkpoint, verified: every chunk its manifest
// names is stored with the bytes its hash says.
type Checkpoint struct {
	ID        string    `json:"id"`
	Manifest  Chunk     `json:"manifest"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
	// Generation is the launch generation whose sandbox made it.
	Generation int `json:"generation"`
	// Files counts its files; Bytes is what they and the state hold;
	// NewBytes is what this checkpoint stored that earlier ones had not.
	Files    int   `json:"files"`
	Bytes    int64 `json:"bytes"`
	NewBytes int64 `json:"new_bytes"`
}

// Manifest lists a checkpoint's workspace entries and the agent's state.
type Manifest struct {
	Version int `json:"version"`
	// Entries are the workspace's folders, files and links, by path
	// relative to the workspace, each folder before what it holds.
	Entries []Entry `json:"entries"`
	// State is the agent's own state (its conversation, what it was
	// asked), opaque to the platform, in chunks.
	State []Chunk `json:"state,omitempty"`
}

// Entry is one folder, file or symbolic link of a workspace.
type Entry struct {
	Path string `json:"path"`
	// Type is "dir", "file" or "link".
	Type string `json:"type"`
	// Mode holds the permission bits (0o7777 at most).
	Mode uint32 `json:"mode"`
	// Size and Chunks are a file's: its bytes, in order.
	Size   int64   `json:"size,omitempty"`
	Chunks []Chunk `json:"chunks,omitempty"`
	// Target is a link's.
	Target string `json:"target,omitempty"`
}

// The entry types.
const (
	EntryDir  = "dir"
	EntryFile = "file"
	EntryLink = "link"
)

// Chunks returns every chunk m names (its files' and its state's), each
// once, in the order first named.
func (m Manifest) Chunks() []Chunk {
	seen := map[string]bool{}
	var out []Chunk
	add := func(c Chunk) {
		if !seen[c.Hash] {
			seen[c.Hash] = true
			out = append(out, c)
		}
	}
	for _, e := range m.Entries {
		for _, c := range e.Chunks {
			add(c)
		}
	}
	for _, c := range m.State {
		add(c)
	}
	return out
}

// Problem is what is wrong with m ("": nothing): an unknown version, a path
// that is absolute, not clean or leaves the workspace, an entry named twice
// or whose folder is not named before it, a file whose chunks do not add up
// to its size, a link that leaves the workspace, or more than the bounds.
func (m Manifest) Problem() string {
	if m.Version != ManifestVersion {
		return fmt.Sprintf("manifest version %d, want %d", m.Version, ManifestVersion)
	}
	if len(m.Entries) > MaxCheckpointEntries {
		return fmt.Sprintf("%d entries, more than %d", len(m.Entries), MaxCheckpointEntries)
	}
	dirs, seen := map[string]bool{".": true}, map[string]bool{}
	var total int64
	for _, e := range m.Entries {
		if e.Path == "" || path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || e.Path == "." || e.Path == ".." || strings.HasPrefix(e.Path, "../") ||
			strings.ContainsAny(e.Path, "\x00\\") {
			return fmt.Sprintf("entry path %q is not a clean path inside the workspace", e.Path)
		}
		if seen[e.Path] {
			return fmt.Sprintf("entry %q is named twice", e.Path)
		}
		seen[e.Path] = true
		if !dirs[path.Dir(e.Path)] {
			return fmt.Sprintf("entry %q comes before its folder", e.Path)
		}
		if e.Mode&^uint32(fs.ModePerm|0o7000) != 0 {
			return fmt.Sprintf("entry %q has mode %o", e.Path, e.Mode)
		}
		switch e.Type {
		case EntryDir:
			dirs[e.Path] = true
		case EntryFile:
			var sum int64
			for _, c := range e.Chunks {
				if p := c.Problem(ChunkSize); p != "" {
					return fmt.Sprintf("file %q: %s", e.Path, p)
				}
				sum += c.Size
			}
			if sum != e.Size {
				return fmt.Sprintf("file %q: its chunks hold %d bytes, its size is %d", e.Path, sum, e.Size)
			}
			total += e.Size
		case EntryLink:
			t := e.Target
			if t == "" || path.IsAbs(t) || strings.ContainsRune(t, 0) {
				return fmt.Sprintf("link %q: target %q is not relative", e.Path, t)
			}
			if j := path.Join(path.Dir(e.Path), t); j == ".." || strings.HasPrefix(j, "../") {
				return fmt.Sprintf("link %q: target %q leaves the workspace", e.Path, t)
			}
		default:
			return fmt.Sprintf("entry %q has type %q", e.Path, e.Type)
		}
		if total > MaxCheckpointBytes {
			return fmt.Sprintf("the files hold more than %d bytes", int64(MaxCheckpointBytes))
		}
	}
	var state int64
	for _, c := range m.State {
		if p := c.Problem(ChunkSize); p != "" {
			return "state: " + p
		}
		state += c.Size
	}
	if state > MaxStateBytes {
		return fmt.Sprintf("the state holds %d bytes, more than %d", state, MaxStateBytes)
	}
	return ""
}
