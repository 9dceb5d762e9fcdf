package harden_test

import (
	"runtime"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/harden"
)

func TestProcessIsNotDumpable(t *testing.T) {
	if err := harden.Process(); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && harden.Dumpable() {
		t.Error("the process is still dumpable")
	}
}
