// Package guardrails loads and checks the platform guardrails document that every
// remote agent receives first in its priming message, and versions it by the
// SHA-256 of its content.
//
// Loading fails closed: a missing, unreadable, empty or whitespace-only document is
// ErrMissing, and no agent may be created without one.
package guardrails

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/remote-agents/remote-agents/shared/blob"
)

// MaxBytes bounds the document; a larger one is refused rather than truncated.
const MaxBytes = 256 * 1024

// DefaultPath is where the document ships, relative to the working directory.
const DefaultPath = "data/platform-guardrails.md"

// ErrMissing: the guardrails could not be used. The wrapped text says why, for
// logs and reports; clients only ever see guardrails_missing.
var ErrMissing = errors.New("platform guardrails missing")

// Doc is a loaded, non-empty guardrails document.
type Doc struct {
	Content string
	// Hash is the hex SHA-256 of Content: the guardrails version.
	Hash string
}

// Source is where the document is read from.
type Source interface {
	// Open returns the document's content. Errors are reported as ErrMissing.
	Open(ctx context.Context) (io.ReadCloser, error)
	// String names the source for logs.
	String() string
}

// Load reads and checks the document from src.
func Load(ctx context.Context, src Source) (Doc, error) {
	r, err := src.Open(ctx)
	if err != nil {
		return Doc{}, fmt.Errorf("%w: %s: %w", ErrMissing, src, err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return Doc{}, fmt.Errorf("%w: read %s: %w", ErrMissing, src, err)
	}
	if len(b) > MaxBytes {
		return Doc{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrMissing, src, MaxBytes)
	}
	if strings.TrimSpace(string(b)) == "" {
		return Doc{}, fmt.Errorf("%w: %s is empty", ErrMissing, src)
	}
	return Doc{Content: string(b), Hash: Hash(b)}, nil
}

// Hash returns the version of a guardrails content: its hex SHA-256.
func Hash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// File is a document on the local filesystem.
type File string

// Open opens the file.
func (f File) Open(context.Context) (io.ReadCloser, error) {
	r, err := os.Open(string(f))
	if err != nil {
		return nil, fmt.Errorf("open guardrails: %w", err)
	}
	return r, nil
}

func (f File) String() string { return string(f) }

// Object is a document in an object store, e.g. s3://bucket/key.
type Object struct {
	Store blob.Store
	URI   string // for logs
	Key   string
}

// Open opens the object.
func (o Object) Open(ctx context.Context) (io.ReadCloser, error) {
	r, _, err := o.Store.Get(ctx, o.Key)
	if err != nil {
		return nil, fmt.Errorf("get guardrails: %w", err)
	}
	return r, nil
}

func (o Object) String() string { return o.URI }

// ParseS3URI splits "s3://bucket/key" into bucket and key; ok is false for any
// other form.
func ParseS3URI(uri string) (bucket, key string, ok bool) {
	rest, found := strings.CutPrefix(uri, "s3://")
	if !found {
		return "", "", false
	}
	bucket, key, found = strings.Cut(rest, "/")
	if !found || bucket == "" || key == "" {
		return "", "", false
	}
	return bucket, key, true
}
