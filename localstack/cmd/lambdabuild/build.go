package main

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// tags, buildFlags and buildEnv are how every function is built: static, for
// Lambda's provided.al2023 runtime without the RPC mode, and with nothing
// in the binary that differs between two builds of the same source: no
// paths (-trimpath), no build id (-buildid=), no version control stamp
// (-buildvcs=false: a commit that leaves a function's code alone leaves
// its zip alone).
var (
	tags       = "lambda.norpc"
	buildFlags = []string{"-tags", tags, "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid="}
)

// buildEnv is the environment of the go build for arch.
func buildEnv(arch string) []string {
	return []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch}
}

// zipTime is the modification time of every file in a zip: fixed, so that
// the zip's bytes depend on its contents only (the earliest time a zip's
// MS-DOS date can hold).
var zipTime = time.Date(1980, time.January, 1, 0, 0, 0, 0, time.UTC)

// functions returns the names of the functions under root/functions: each
// folder with a main.go, sorted.
func functions(root string) ([]string, error) {
	mains, err := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	if err != nil {
		return nil, fmt.Errorf("find the functions: %w", err)
	}
	if len(mains) == 0 {
		return nil, fmt.Errorf("no functions under %s", filepath.Join(root, "functions"))
	}
	var names []string
	for _, m := range mains {
		names = append(names, filepath.Base(filepath.Dir(m)))
	}
	slices.Sort(names)
	return names, nil
}

// build builds the functions names of the module at root for linux/arch in
// one go build (packages compile once, in parallel) and writes
// out/<name>/bootstrap and out/<name>.zip for each; go's output goes to
// logs.
func build(root, arch, out string, names []string, logs io.Writer) error {
	if len(names) == 0 {
		return errors.New("no function to build")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	bin, err := os.MkdirTemp(out, ".build-")
	if err != nil {
		return fmt.Errorf("create a build folder: %w", err)
	}
	defer func() { _ = os.RemoveAll(bin) }()
	args := append([]string{"build"}, buildFlags...)
	// With several packages -o names a folder, and each binary is named
	// after its package's folder; with one it names the binary.
	args = append(args, "-o", filepath.Join(bin, "bootstrap"))
	if len(names) > 1 {
		args[len(args)-1] = bin + string(filepath.Separator)
	}
	for _, n := range names {
		args = append(args, "./functions/"+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, logs, logs
	cmd.Env = append(os.Environ(), buildEnv(arch)...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %v for linux/%s: %w", names, arch, err)
	}
	for _, n := range names {
		built := filepath.Join(bin, n)
		if len(names) == 1 {
			built = filepath.Join(bin, "bootstrap")
		}
		bootstrap := filepath.Join(out, n, "bootstrap")
		if err := os.MkdirAll(filepath.Dir(bootstrap), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(bootstrap), err)
		}
		if err := os.Rename(built, bootstrap); err != nil {
			return fmt.Errorf("move %s's binary: %w", n, err)
		}
		if err := writeZip(bootstrap, filepath.Join(out, n+".zip")); err != nil {
			return err
		}
	}
	return nil
}

// writeZip writes the deployment zip of the binary bootstrap to path: the one
// file, named bootstrap, executable, deflated, dated zipTime. It replaces
// path only once the zip is whole.
func writeZip(bootstrap, path string) error {
	in, err := os.Open(bootstrap)
	if err != nil {
		return fmt.Errorf("zip %s: %w", bootstrap, err)
	}
	defer func() { _ = in.Close() }()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".zip-")
	if err != nil {
		return fmt.Errorf("zip %s: %w", bootstrap, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	zw := zip.NewWriter(tmp)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: zipTime}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = io.Copy(w, in)
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("zip %s into %s: %w", bootstrap, path, err)
	}
	return nil
}
