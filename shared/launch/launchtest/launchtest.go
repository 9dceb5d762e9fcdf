// Package launchtest is the contract of launch.Launcher, run against every
// implementation: process (real child processes) and fargate (against a local
// server speaking the ECS wire format) run it from their tests.
package launchtest

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/launch"
)

// Harness is a launcher under test and a view of the sandboxes it runs.
type Harness struct {
	Launcher launch.Launcher
	// Up waits until the sandbox ref is up (ready to take a stop: a process has
	// installed its signal handlers, a task is known to ECS) and returns the
	// environment it was started with. It fails t if that does not happen.
	Up func(t *testing.T, ref string) map[string]string
	// Running returns the refs of the sandboxes running now: started, and not
	// stopped or asked to stop.
	Running func() []string
}

// Run checks the launchers newHarness returns against the launch.Launcher
// contract. Each subtest calls newHarness once and runs in parallel with the
// others. A sandbox started by the harness exits cleanly on SIGTERM.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("launch is idempotent per session and generation", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		spec := Spec("5b1f6d7e-0c2a-4e8b-9f3d-1a2b3c4d5e6f", 1)
		ref := launch1(t, h, spec)
		if again, err := h.Launcher.Launch(t.Context(), spec); err != nil || again != ref {
			t.Errorf("second launch: %q, %v; want %q", again, err, ref)
		}
		if env := h.Up(t, ref); !maps.Equal(env, spec.Env()) {
			t.Errorf("sandbox environment %v, want %v", env, spec.Env())
		}
		wantRunning(t, h, ref)

		next := spec
		next.Generation = 2
		ref2 := launch1(t, h, next)
		if ref2 == ref {
			t.Fatalf("generation 2 got generation 1's sandbox %q", ref)
		}
		if env := h.Up(t, ref2); env["RA_GENERATION"] != "2" {
			t.Errorf("generation 2 started with %v", env)
		}
		other := Spec("0e9d8c7b-6a5f-4e3d-8c1b-0a9f8e7d6c5b", 1)
		ref3 := launch1(t, h, other)
		if ref3 == ref || ref3 == ref2 {
			t.Fatalf("another session got the sandbox %q", ref3)
		}
		if env := h.Up(t, ref3); env["PROLIFERATE_SESSION_ID"] != other.SessionID {
			t.Errorf("another session started with %v", env)
		}
		wantRunning(t, h, ref, ref2, ref3)
	})

	t.Run("concurrent launches of one spec start one sandbox", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		spec := Spec("7c6b5a49-3827-4615-a4f3-e2d1c0b9a887", 3)
		const n = 8
		refs := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ref, err := h.Launcher.Launch(t.Context(), spec)
				if err != nil {
					t.Errorf("launch %d: %v", i, err)
				}
				refs[i] = ref
			})
		}
		wg.Wait()
		for i, ref := range refs {
			if ref != refs[0] {
				t.Errorf("launch %d got %q, launch 0 %q", i, ref, refs[0])
			}
		}
		h.Up(t, refs[0])
		wantRunning(t, h, refs[0])
	})

	t.Run("stop, stop again, launch again", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		spec := Spec("a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", 1)
		ref := launch1(t, h, spec)
		keep := launch1(t, h, Spec("f0e1d2c3-b4a5-4968-8776-655443322110", 1))
		h.Up(t, ref)
		h.Up(t, keep)
		if err := h.Launcher.Stop(t.Context(), ref, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		wantRunning(t, h, keep)
		if err := h.Launcher.Stop(t.Context(), ref, 10*time.Second); err != nil {
			t.Errorf("stopping a stopped sandbox: %v", err)
		}
		// Launching a stopped generation again starts nothing: a new sandbox
		// is a new generation.
		if again, err := h.Launcher.Launch(t.Context(), spec); err != nil || again != ref {
			t.Errorf("launch after stop: %q, %v; want %q", again, err, ref)
		}
		wantRunning(t, h, keep)
	})

	t.Run("stop of an unknown ref is no error", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		if err := h.Launcher.Stop(t.Context(), "never-launched", time.Second); err != nil {
			t.Errorf("stop of an unknown ref: %v", err)
		}
	})
}

// Spec returns a launch spec for session id and generation gen.
func Spec(id string, gen int) launch.Spec {
	return launch.Spec{SessionID: id, Generation: gen, GatewayURL: "http://127.0.0.1:1/gw", BootstrapCode: "rbc_" + id[:8], TmuxSessionName: "ra-" + id[:8]}
}

func launch1(t *testing.T, h Harness, spec launch.Spec) string {
	t.Helper()
	ref, err := h.Launcher.Launch(t.Context(), spec)
	if err != nil {
		t.Fatalf("launch %s/%d: %v", spec.SessionID, spec.Generation, err)
	}
	if ref == "" {
		t.Fatalf("launch %s/%d: empty ref", spec.SessionID, spec.Generation)
	}
	return ref
}

func wantRunning(t *testing.T, h Harness, refs ...string) {
	t.Helper()
	got := h.Running()
	slices.Sort(got)
	slices.Sort(refs)
	if !slices.Equal(got, refs) {
		t.Errorf("running %v, want %v", got, refs)
	}
}
