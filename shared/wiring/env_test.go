package wiring_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

type key int

// Once builds a key's value once per Env, keeps no error, and keeps the
// values of different keys and Envs apart.
func TestOnceBuildsOncePerEnvAndKey(t *testing.T) {
	t.Parallel()
	newEnv := func() *wiring.Env {
		e, err := wiring.New(config.PlatformDefaults(), aws.Config{Region: "us-east-1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := newEnv()
	builds := 0
	build := func() (*int, error) { builds++; v := builds; return &v, nil }
	failed := errors.New("down")
	if _, err := wiring.Once(e, key(1), func() (*int, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Fatalf("Once = %v, want the build's error", err)
	}
	first, err := wiring.Once(e, key(1), build)
	if err != nil || *first != 1 {
		t.Fatalf("Once after a failed build = %v, %v; want a new build", first, err)
	}
	if again, _ := wiring.Once(e, key(1), build); again != first || builds != 1 {
		t.Fatalf("Once built again: %d builds", builds)
	}
	if other, _ := wiring.Once(e, key(2), build); other == first {
		t.Fatal("another key got the first key's value")
	}
	if other, _ := wiring.Once(newEnv(), key(1), build); other == first {
		t.Fatal("another Env got the first Env's value")
	}
}
