package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/syncbuf"
)

// Writers and a reader at once (run with -race): every write is kept whole.
func TestConcurrentWritesAreKept(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("line\n", 800) {
		t.Errorf("%d bytes, want 800 whole lines", len(got))
	}
}
