// Package syncbuf holds Buffer, a byte buffer that goroutines write and read
// at the same time: tests give it as the stdout, stderr or log of something
// running concurrently and read what was written so far. Standard library
// only, so that any test may import it.
package syncbuf

import (
	"bytes"
	"io"
	"sync"
)

// Buffer is a bytes.Buffer behind a mutex. Its zero value is empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

var _ io.Writer = (*Buffer)(nil)

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
