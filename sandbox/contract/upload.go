package contract

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/upload"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Uploader PUTs files to presigned URLs.
type Uploader struct {
	HTTP *http.Client
}

// Put uploads the file at path to a presigned URL with the headers the gateway
// signed into it (the file's length and type among them: the object store
// refuses a file that is not what was asked for).
func (u *Uploader) Put(ctx context.Context, url, path string, headers map[string]string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	client := u.HTTP
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Minute}
	}
	if err := upload.Put(ctx, client, url, f, info.Size(), headers); err != nil {
		return fmt.Errorf("the upload failed: %w", err)
	}
	return nil
}

// uploadFolder uploads the regular files under folder (workspace-relative) for
// verify call id, and returns how many there were.
func (o Options) uploadFolder(ctx context.Context, p *policy.Policy, id, folder string) (int, error) {
	root, err := p.CheckPath("read", folder)
	if err != nil {
		return 0, err
	}
	if !inside(p.Workspace(), root) {
		return 0, fmt.Errorf("%s is outside the workspace", folder)
	}
	var files []sandboxwire.UploadFile
	local := map[string]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == root {
				return fmt.Errorf("%s does not exist; put the evidence there first", folder)
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil // directories are walked; symlinks and devices are not uploaded
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > sandboxwire.MaxEvidenceBytes {
			return fmt.Errorf("%s is larger than %d MB", d.Name(), sandboxwire.MaxEvidenceBytes>>20)
		}
		if len(files) == sandboxwire.MaxUploadFiles {
			return fmt.Errorf("%s holds more than %d files", folder, sandboxwire.MaxUploadFiles)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		files = append(files, sandboxwire.UploadFile{Path: rel, SizeBytes: info.Size(), ContentType: upload.ContentType(rel)})
		local[rel] = path
		return nil
	})
	if err != nil || len(files) == 0 {
		return 0, err
	}
	return len(files), o.upload(ctx, sandboxwire.UploadsRequest{Tool: toolspec.Verify, ToolCallID: id, Files: files}, local)
}

// uploadSnapshot archives the workspace, without what is the session's rather
// than the workspace's (the agent's state, the env file, o.Private), and
// uploads it for save_snapshot call id.
func (o Options) uploadSnapshot(ctx context.Context, p *policy.Policy, id string) error {
	tmp, err := os.CreateTemp("", "snapshot-*.tar.gz")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	size, err := archive(ctx, tmp, p.Workspace(), o.private(p.Workspace()))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the workspace could not be archived: %w", err)
	}
	if size > sandboxwire.MaxSnapshotBytes {
		return fmt.Errorf("the workspace archive is larger than %d GB", sandboxwire.MaxSnapshotBytes>>30)
	}
	in := sandboxwire.UploadsRequest{Tool: toolspec.SaveSnapshot, ToolCallID: id, Files: []sandboxwire.UploadFile{
		{Path: sandboxwire.SnapshotObject, SizeBytes: size, ContentType: "application/gzip"},
	}}
	return o.upload(ctx, in, map[string]string{sandboxwire.SnapshotObject: tmp.Name()})
}

func (o Options) upload(ctx context.Context, in sandboxwire.UploadsRequest, local map[string]string) error {
	out, err := o.Channel.Uploads(ctx, in)
	if err != nil {
		return fmt.Errorf("the upload could not start: %w", err)
	}
	for _, up := range out.Uploads {
		path, ok := local[up.Path]
		if !ok {
			return fmt.Errorf("the gateway offered an upload for an unknown file %q", up.Path)
		}
		if err := o.Uploader.Put(ctx, up.URL, path, up.Headers); err != nil {
			return err
		}
	}
	return nil
}

// agentState is the agent's own folder in the workspace (memory, sessions).
const agentState = ".agent"

// private is the set of workspace-relative paths a snapshot leaves out.
func (o Options) private(workspace string) map[string]bool {
	skip := map[string]bool{agentState: true}
	if rel, err := filepath.Rel(workspace, o.EnvFile); o.EnvFile != "" && err == nil {
		skip[filepath.ToSlash(rel)] = true
	}
	for _, p := range o.Private {
		skip[filepath.ToSlash(filepath.Clean(p))] = true
	}
	return skip
}

// archive writes a gzipped tar of dir to w, leaving out the paths in skip
// (relative to dir, with '/'; a folder with all it holds), and returns the
// bytes written.
func archive(ctx context.Context, w io.Writer, dir string, skip map[string]bool) (int64, error) {
	root, err := os.OpenRoot(dir) // files are opened inside dir, whatever links change meanwhile
	if err != nil {
		return 0, err
	}
	defer func() { _ = root.Close() }()
	cw := &counter{w: w}
	gz := gzip.NewWriter(cw)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		if skip[filepath.ToSlash(rel)] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if d.Type()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return nil // sockets and the like are not archived
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := root.Open(rel)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	if err := gz.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func inside(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
