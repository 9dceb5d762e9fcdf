package sandboxwire

import (
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of the channel: the platform refuses more, the sandbox never sends more.
const (
	// MaxEventsPerAppend, MaxEventBytes (of one event's data as JSON) and
	// MaxEventTypeLen bound POST events.
	MaxEventsPerAppend = 25
	MaxEventBytes      = 32 * 1024
	MaxEventTypeLen    = 64
	// MaxEventTextChars is where a sandbox cuts tool arguments and output in a
	// ToolCall event.
	MaxEventTextChars = 4000
	// MaxStatusBytes bounds POST status.
	MaxStatusBytes = 4096
	// MaxUploadsRequestBytes bounds POST uploads.
	MaxUploadsRequestBytes = 256 * 1024
	// MaxResponseBytes bounds what a sandbox reads of any answer.
	MaxResponseBytes = 1 << 20
	// InboxPage bounds the events one inbox read looks at.
	InboxPage = 100
)

// Limits of uploads.
const (
	// UploadTTL is how long a presigned upload URL works.
	UploadTTL = 15 * time.Minute
	// MaxUploadFiles bounds one call's files; MaxEvidenceBytes one verify file;
	// MaxSnapshotBytes the save_snapshot archive.
	MaxUploadFiles   = 200
	MaxEvidenceBytes = 100 << 20
	MaxSnapshotBytes = 5 << 30
	// MaxUploadPathBytes bounds an uploaded file's relative path.
	MaxUploadPathBytes = 500
	// MaxContentTypeBytes bounds an upload's content type.
	MaxContentTypeBytes = 255
	// SnapshotObject is the one file save_snapshot uploads.
	SnapshotObject = "snapshot.tar.gz"
	// MaxEnvBytes bounds the env values of one submission.
	MaxEnvBytes = 256 * 1024
)

// ValidUploadPath reports whether p is a clean relative path of at most
// MaxUploadPathBytes of UTF-8, with no empty, "." or ".." segment and no
// control character: safe to append to an object key prefix.
func ValidUploadPath(p string) bool {
	if p == "" || len(p) > MaxUploadPathBytes || !utf8.ValidString(p) || path.Clean(p) != p || strings.HasPrefix(p, "/") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
