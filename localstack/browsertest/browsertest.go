// Package browsertest starts the headless Chromium that browser tests drive
// with chromedp: $RA_CHROMIUM, or Chromium on the PATH (.ci/run installs
// Debian's).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium returns the path of the browser to drive; the test fails when
// there is none.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("RA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the browser tests need Chromium: apt-get install chromium, or set RA_CHROMIUM")
	return ""
}

// Start starts a headless Chromium with a window of width × height, stopped
// when the test ends, and returns its first tab.
func Start(t testing.TB, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(width, height),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}
