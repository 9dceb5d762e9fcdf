// Package blob defines the object store that holds outputs, logs, snapshots and
// artifacts: objects under keys, listed by prefix, and short-lived presigned URLs a
// sandbox or browser can use without credentials; and Sealed, small secret
// documents encrypted at rest. s3blob implements both on Amazon S3.
package blob

import (
	"context"
	"errors"
	"io"
	"time"
)

// Limits on listing and presigning.
const (
	DefaultListSize = 100
	MaxListSize     = 1000
	MaxPresignTTL   = 7 * 24 * time.Hour
)

// ErrNotFound: no object has that key.
var ErrNotFound = errors.New("object not found")

// ErrChanged: the object is not at the version a conditional write expected.
var ErrChanged = errors.New("object changed since it was read")

// Object describes a stored object.
type Object struct {
	Key         string
	Size        int64
	ContentType string
	ETag        string
	Modified    time.Time
}

// Page is one page of a listing; Next is "" when there is nothing more.
type Page struct {
	Objects []Object
	Next    string
}

// Presigned is a presigned request: its URL, and the headers the client must
// send with it as they are (they are signed). Content-Length is among them:
// HTTP clients set it from the body, which must be exactly that long.
type Presigned struct {
	URL     string
	Headers map[string]string
}

// Store is a bucket of objects.
type Store interface {
	// Put stores size bytes from r under key.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	// Get opens the object under key; the caller closes it. ErrNotFound if absent.
	Get(ctx context.Context, key string) (io.ReadCloser, Object, error)
	// List returns up to limit (1..MaxListSize, 0 for DefaultListSize) objects whose
	// keys start with prefix, in key order, from the position after returned.
	List(ctx context.Context, prefix, after string, limit int) (Page, error)
	// PresignGet returns a URL that reads key for ttl (at most MaxPresignTTL).
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
	// PresignPut returns a request that writes exactly size bytes of
	// contentType under key for ttl: the length and type are signed, so the
	// store refuses a body of any other length.
	PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (Presigned, error)
	// Copy copies the object under src to dst; ErrNotFound if src is absent.
	Copy(ctx context.Context, src, dst string) error
}

// Sealed keeps small secret documents (env values kept for a configuration):
// encrypted at rest by the store, each replaced only if unchanged since it was
// read, so that concurrent read-modify-writes lose nothing.
type Sealed interface {
	// ReadSealed returns the document under key, of at most limit bytes, and its
	// version. ErrNotFound if absent; an error if larger than limit.
	ReadSealed(ctx context.Context, key string, limit int64) (data []byte, version string, err error)
	// WriteSealed stores data under key, encrypted at rest, if the document is
	// at version (absent, if version is ""). ErrChanged if it is not.
	WriteSealed(ctx context.Context, key string, data []byte, version string) error
}
