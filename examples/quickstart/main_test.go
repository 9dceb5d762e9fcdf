package main

import (
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/devtest"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// The quick start runs against the dev server: the embed URL, the answer to
// its question, the shutdown.
func TestQuickstart(t *testing.T) {
	srv := devtest.Start(t)
	var out strings.Builder
	if err := run(t.Context(), &out, srv.URL, devtest.AppKey, "What can you do?"); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"Embed it: " + srv.URL + "/embed/", "you: What can you do?", "agent: [scripted provider: no LLM is configured] I received: What can you do?", "Shutdown: shutdown_initiated"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}
