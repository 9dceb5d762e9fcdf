package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	sandboxcheckpoint "github.com/remote-agents/remote-agents/sandbox/checkpoint"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// The platform's side of these tests is its own (package shared/checkpoint
// on the emulators' S3), as the upload helper's test does.

func TestMain(m *testing.M) { awstest.Main(m) }

// channel is the sandbox channel of agent id's sandbox, as the platform
// answers its checkpoint routes, counting the chunks uploaded.
type channel struct {
	svc      *checkpoint.Service
	id       string
	last     string
	uploaded int
}

func (c *channel) Do(ctx context.Context, _, route string, in, out any) error {
	switch route {
	case sandboxwire.RouteCheckpointUploads:
		req := in.(sandboxwire.CheckpointUploadsRequest)
		ups, err := c.svc.Uploads(ctx, c.id, req.Chunks)
		c.uploaded += len(req.Chunks)
		*out.(*sandboxwire.CheckpointUploadsResponse) = sandboxwire.CheckpointUploadsResponse{Uploads: ups}
		return err
	case sandboxwire.RouteCheckpointDownloads:
		downs, err := c.svc.Downloads(ctx, c.id, in.(sandboxwire.CheckpointDownloadsRequest).Hashes)
		*out.(*sandboxwire.CheckpointDownloadsResponse) = sandboxwire.CheckpointDownloadsResponse{Downloads: downs}
		return err
	case sandboxwire.RouteCheckpoints:
		req := in.(sandboxwire.CheckpointCommit)
		cp, err := c.svc.Commit(ctx, c.id, 1, c.last, req.Manifest, req.Reason)
		if err == nil {
			c.last = cp.ID
		}
		*out.(*sandboxwire.Checkpoint) = cp
		return err
	}
	return fmt.Errorf("route %s", route)
}

func service(t *testing.T) *checkpoint.Service {
	t.Helper()
	set, _ := awstest.Resources(t)
	store := s3blob.New(awsconfig.NewS3(awstest.Config(t)), set.Bucket.Name)
	return &checkpoint.Service{Objects: store}
}

func write(t *testing.T, dir, rel string, data []byte, mode fs.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// tree is what dir holds: each entry's type, mode, and bytes or target.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out[rel] = fmt.Sprintf("dir %o", info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("file %o %d %x", info.Mode().Perm(), len(b), sum[:8])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A checkpoint brings back the workspace byte for byte (folders, files of
// any size, their modes, links inside it; not a link out of it) and the
// agent's state; an unchanged workspace costs only a manifest the second
// time, a changed file only its changed chunk.
func TestCheckpointRoundTripAndIncrement(t *testing.T) {
	t.Parallel()
	svc := service(t)
	src := t.TempDir()
	big := make([]byte, 9<<20+80) // three chunks, the last short, none alike
	_, _ = rand.NewChaCha8([32]byte{1}).Read(big)
	write(t, src, "README.md", []byte("# hello\n"), 0o644)
	write(t, src, "bin/run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	write(t, src, "data/big.bin", big, 0o600)
	write(t, src, "data/copy.bin", big, 0o600) // the same chunks: stored once
	write(t, src, "empty", nil, 0o644)
	if err := os.Mkdir(filepath.Join(src, "empty-dir"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("bin/run.sh", filepath.Join(src, "run")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "outside")); err != nil {
		t.Fatal(err)
	}
	ch := &channel{svc: svc, id: "agent-a"}
	w := &sandboxcheckpoint.Writer{Channel: ch, Dir: src, Skip: func(rel string) bool { return rel == "skipped" }}
	write(t, src, "skipped/secret", []byte("not kept"), 0o600)
	state := []byte(`{"messages":["hello"]}`)
	first, err := w.Write(t.Context(), state, sandboxwire.CheckpointPause)
	if err != nil {
		t.Fatal(err)
	}
	// 3 chunks of big (copy.bin shares them), README, run.sh, the state
	// and the manifest (the empty file has no chunk).
	if ch.uploaded != 7 || first.Files != 5 || first.Bytes != int64(2*len(big)+8+18+len(state)) {
		t.Errorf("first checkpoint %+v after %d chunks uploaded", first, ch.uploaded)
	}

	dst := t.TempDir()
	got, m, err := sandboxcheckpoint.Restore(t.Context(), ch, nil, dst, first.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	want := tree(t, src)
	delete(want, "outside")
	delete(want, "skipped")
	delete(want, filepath.Join("skipped", "secret"))
	if have := tree(t, dst); fmt.Sprint(have) != fmt.Sprint(want) {
		t.Errorf("restored\n%v\nwant\n%v", have, want)
	}
	if !bytes.Equal(got, state) || len(m.Entries) != len(want) {
		t.Errorf("state %q, %d entries", got, len(m.Entries))
	}

	// Unchanged: only the manifest is new.
	ch.uploaded = 0
	second, err := w.Write(t.Context(), state, sandboxwire.CheckpointPeriodic)
	if err != nil {
		t.Fatal(err)
	}
	if ch.uploaded != 1 || second.NewBytes != second.Manifest.Size || second.ID <= first.ID {
		t.Errorf("an unchanged workspace: %d chunks uploaded, %+v", ch.uploaded, second)
	}
	// One byte of the big file changed: one chunk and the manifest.
	big[5<<20] = 'X'
	write(t, src, "data/big.bin", big, 0o600)
	ch.uploaded = 0
	third, err := w.Write(t.Context(), state, sandboxwire.CheckpointPeriodic)
	if err != nil {
		t.Fatal(err)
	}
	if ch.uploaded != 2 || third.NewBytes != third.Manifest.Size+sandboxwire.ChunkSize {
		t.Errorf("one chunk changed: %d chunks uploaded, %+v", ch.uploaded, third)
	}
	list, next, err := svc.List(t.Context(), "agent-a", "", 0)
	if err != nil || next != "" || len(list) != 3 || list[0].ID != first.ID || list[2].ID != third.ID {
		t.Errorf("list %+v, %q, %v", list, next, err)
	}
	page, next, err := svc.List(t.Context(), "agent-a", "", 2)
	if err != nil || len(page) != 2 || next != second.ID {
		t.Errorf("first page %+v, next %q, %v", page, next, err)
	}
	if rest, _, err := svc.List(t.Context(), "agent-a", next, 2); err != nil || len(rest) != 1 || rest[0].ID != third.ID {
		t.Errorf("second page %+v, %v", rest, err)
	}

	// A fork owes nothing to its source: deleting the source leaves it whole.
	forked, err := svc.Fork(t.Context(), "agent-a", "agent-b", third)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(t.Context(), "agent-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(t.Context(), "agent-a", third.ID); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("a deleted agent's checkpoint: %v", err)
	}
	fdst := t.TempDir()
	if _, _, err := sandboxcheckpoint.Restore(t.Context(), &channel{svc: svc, id: "agent-b"}, nil, fdst, forked.Manifest); err != nil {
		t.Fatal(err)
	}
	if a, b := tree(t, fdst)["data/big.bin"], tree(t, src)["data/big.bin"]; a != b {
		t.Errorf("the fork's big.bin %s, want %s", a, b)
	}
}

// Restore writes nothing outside its folder, whatever links the folder
// holds: a folder of the checkpoint where a link to elsewhere is becomes a
// folder.
func TestRestoreStaysInItsFolder(t *testing.T) {
	t.Parallel()
	svc := service(t)
	src := t.TempDir()
	write(t, src, "sub/x", []byte("inside"), 0o644)
	ch := &channel{svc: svc, id: "agent-r"}
	cp, err := (&sandboxcheckpoint.Writer{Channel: ch, Dir: src}).Write(t.Context(), nil, sandboxwire.CheckpointPause)
	if err != nil {
		t.Fatal(err)
	}
	dst, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dst, "sub")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sandboxcheckpoint.Restore(t.Context(), ch, nil, dst, cp.Manifest); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("restore wrote %v outside its folder", entries)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "x")); err != nil || string(b) != "inside" {
		t.Errorf("sub/x: %q, %v", b, err)
	}
}
