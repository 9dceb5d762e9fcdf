package emulators

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Packages of the Go emulators, pinned in localstack/tools/go.mod.
const (
	goawsPackage    = "github.com/Admiral-Piett/goaws/app/cmd"
	gofakes3Package = "github.com/johannesboyne/gofakes3/cmd/gofakes3"
)

type binaries struct {
	goaws    string
	gofakes3 string
}

// BinDir is where the Go emulators are built, under the repository root.
func BinDir(root string) string {
	return filepath.Join(root, ".cache", "bin")
}

// toolBinaries returns the built goaws and gofakes3, building them first if they are
// missing. RA_GOAWS_BIN and RA_GOFAKES3_BIN name prebuilt ones instead. A file lock
// keeps concurrent test binaries from building at the same time.
func toolBinaries(ctx context.Context, root string) (binaries, error) {
	dir := BinDir(root)
	b := binaries{
		goaws:    envOr("RA_GOAWS_BIN", filepath.Join(dir, "goaws")),
		gofakes3: envOr("RA_GOFAKES3_BIN", filepath.Join(dir, "gofakes3")),
	}
	if exists(b.goaws) && exists(b.gofakes3) {
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, fmt.Errorf("emulators: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return b, fmt.Errorf("emulators: build lock: %w", err)
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return b, fmt.Errorf("emulators: build lock: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	for _, t := range []struct{ out, pkg string }{{b.goaws, goawsPackage}, {b.gofakes3, gofakes3Package}} {
		if exists(t.out) {
			continue
		}
		if err := Build(ctx, root, t.pkg, t.out); err != nil {
			return b, err
		}
	}
	return b, nil
}

// Build compiles one emulator package of localstack/tools into out.
func Build(ctx context.Context, root, pkg, out string) error {
	tmp := out + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=readonly", "-buildvcs=false", "-o", tmp, pkg)
	cmd.Dir = filepath.Join(root, "localstack", "tools")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("emulators: build %s: %w\n%s", pkg, err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("emulators: build %s: %w", pkg, err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
