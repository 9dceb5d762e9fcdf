// Package checkpoint writes a sandbox's checkpoint and restores one
// (sandboxwire's Checkpoint): its workspace's folders, files and links, and
// the agent's own state, in content-addressed chunks. A Writer uploads only
// the chunks the agent's last checkpoint (written or restored) does not
// have, then the manifest, then commits it; the platform verifies every
// chunk before it records the checkpoint. Restore brings one back into a
// folder, checking every chunk's hash as it comes.
package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/remote-agents/remote-agents/sandbox/upload"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Channel is the sandbox channel (gateway.Client has it).
type Channel interface {
	Do(ctx context.Context, method, route string, in, out any) error
}

// transfers is how many chunks go up or come down at once.
const transfers = 8

// Writer writes the checkpoints of one agent's workspace.
type Writer struct {
	Channel Channel
	// HTTP reaches the object store (nil: a client of its own).
	HTTP *http.Client
	// Dir is the workspace.
	Dir string
	// Skip leaves entries out, by path relative to Dir (slash-separated);
	// a folder left out is left out whole. Nil leaves nothing out.
	Skip func(rel string) bool

	mu sync.Mutex
	// known are the chunks of the last checkpoint written or restored:
	// stored already, so not uploaded again.
	known map[string]bool
}

// Know records that the chunks of manifest m are stored (a restored
// checkpoint's): a checkpoint made after uploads none of them again.
func (w *Writer) Know(m sandboxwire.Manifest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known = map[string]bool{}
	for _, c := range m.Chunks() {
		w.known[c.Hash] = true
	}
}

// ErrChanged: a file changed while the checkpoint was written; another
// attempt will see it as it is then.
var ErrChanged = errors.New("a file changed while the checkpoint was written")

// source is where a chunk's bytes are: a file's range, or the state's.
type source struct {
	path   string // "" for state
	offset int64
	size   int64
	state  []byte
}

// Write writes a checkpoint of the workspace and state (the agent's own,
// opaque to the platform) for reason, and commits it.
func (w *Writer) Write(ctx context.Context, state []byte, reason string) (sandboxwire.Checkpoint, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := sandboxwire.Manifest{Version: sandboxwire.ManifestVersion, Entries: []sandboxwire.Entry{}}
	sources := map[string]source{}
	err := filepath.WalkDir(w.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == w.Dir {
			return nil
		}
		rel, err := filepath.Rel(w.Dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if w.Skip != nil && w.Skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := sandboxwire.Entry{Path: rel, Mode: uint32(info.Mode().Perm())}
		switch {
		case d.IsDir():
			e.Type = sandboxwire.EntryDir
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			t := filepath.ToSlash(target)
			if j := path.Join(path.Dir(rel), t); path.IsAbs(t) || j == ".." || strings.HasPrefix(j, "../") {
				return nil // a link out of the workspace is not the workspace's
			}
			e.Type, e.Target, e.Mode = sandboxwire.EntryLink, t, 0o777
		case d.Type().IsRegular():
			e.Type, e.Size = sandboxwire.EntryFile, info.Size()
			if e.Chunks, err = hashFile(p, info.Size(), sources); err != nil {
				return err
			}
		default:
			return nil // sockets, pipes, devices: nothing to keep
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return sandboxwire.Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	// A state of no bytes is one empty chunk; none (nil), no chunk.
	for off := 0; state != nil && (off == 0 || off < len(state)); off += sandboxwire.ChunkSize {
		part := state[off:min(off+sandboxwire.ChunkSize, len(state))]
		sum := sha256.Sum256(part)
		c := sandboxwire.Chunk{Hash: hex.EncodeToString(sum[:]), Size: int64(len(part))}
		sources[c.Hash] = source{state: part, size: c.Size}
		m.State = append(m.State, c)
	}
	if p := m.Problem(); p != "" {
		return sandboxwire.Checkpoint{}, fmt.Errorf("checkpoint: %s", p)
	}
	var fresh []sandboxwire.Chunk
	for _, c := range m.Chunks() {
		if !w.known[c.Hash] {
			fresh = append(fresh, c)
		}
	}
	if err := w.upload(ctx, fresh, sources); err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	sum := sha256.Sum256(raw)
	manifest := sandboxwire.Chunk{Hash: hex.EncodeToString(sum[:]), Size: int64(len(raw))}
	sources[manifest.Hash] = source{state: raw, size: manifest.Size}
	if err := w.upload(ctx, []sandboxwire.Chunk{manifest}, sources); err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	var cp sandboxwire.Checkpoint
	if err := w.Channel.Do(ctx, http.MethodPost, sandboxwire.RouteCheckpoints, sandboxwire.CheckpointCommit{Manifest: manifest, Reason: reason}, &cp); err != nil {
		return sandboxwire.Checkpoint{}, fmt.Errorf("commit the checkpoint: %w", err)
	}
	w.known = map[string]bool{}
	for _, c := range m.Chunks() {
		w.known[c.Hash] = true
	}
	return cp, nil
}

// hashFile cuts the file at p (size bytes) into chunks, noting where each
// is in sources.
func hashFile(p string, size int64, sources map[string]source) ([]sandboxwire.Chunk, error) {
	f, err := os.Open(p) //nolint:gosec // a file of the workspace, found by the walk
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	chunks := []sandboxwire.Chunk{}
	buf := make([]byte, sandboxwire.ChunkSize)
	for off := int64(0); off < size; {
		n, err := io.ReadFull(f, buf[:min(int64(len(buf)), size-off)])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrChanged, p, err)
		}
		sum := sha256.Sum256(buf[:n])
		c := sandboxwire.Chunk{Hash: hex.EncodeToString(sum[:]), Size: int64(n)}
		if _, ok := sources[c.Hash]; !ok {
			sources[c.Hash] = source{path: p, offset: off, size: int64(n)}
		}
		chunks = append(chunks, c)
		off += int64(n)
	}
	return chunks, nil
}

// upload uploads chunks, from sources, a request's worth at a time.
func (w *Writer) upload(ctx context.Context, chunks []sandboxwire.Chunk, sources map[string]source) error {
	for len(chunks) > 0 {
		batch := chunks[:min(len(chunks), sandboxwire.MaxChunksPerRequest)]
		chunks = chunks[len(batch):]
		var res sandboxwire.CheckpointUploadsResponse
		if err := w.Channel.Do(ctx, http.MethodPost, sandboxwire.RouteCheckpointUploads, sandboxwire.CheckpointUploadsRequest{Chunks: batch}, &res); err != nil {
			return fmt.Errorf("checkpoint uploads: %w", err)
		}
		if len(res.Uploads) != len(batch) {
			return fmt.Errorf("checkpoint uploads: %d for %d chunks", len(res.Uploads), len(batch))
		}
		err := each(ctx, res.Uploads, func(ctx context.Context, t sandboxwire.ChunkTransfer) error {
			src, ok := sources[t.Hash]
			if !ok {
				return fmt.Errorf("checkpoint uploads: chunk %s was not asked for", t.Hash)
			}
			body, err := src.read()
			if err != nil {
				return err
			}
			if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != t.Hash {
				return fmt.Errorf("%w: %s", ErrChanged, src.path)
			}
			if err := upload.Put(ctx, w.client(), t.URL, bytes.NewReader(body), int64(len(body)), t.Headers); err != nil {
				return fmt.Errorf("upload chunk %s: %w", t.Hash, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (s source) read() ([]byte, error) {
	if s.path == "" {
		return s.state, nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrChanged, s.path, err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, s.size)
	if _, err := f.ReadAt(buf, s.offset); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrChanged, s.path, err)
	}
	return buf, nil
}

func (w *Writer) client() *http.Client {
	if w.HTTP != nil {
		return w.HTTP
	}
	return http.DefaultClient
}

// each runs f on every item, transfers at a time, stopping at the first
// error.
func each[T any](ctx context.Context, items []T, f func(context.Context, T) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(transfers)
	for _, it := range items {
		g.Go(func() error { return f(ctx, it) })
	}
	return g.Wait()
}

// Restore brings the checkpoint whose manifest is the chunk manifest back
// into dir: its folders, files and links (over what dir holds of the same
// names; nothing outside dir, whatever links dir holds), and returns the
// agent's state and the manifest.
func Restore(ctx context.Context, ch Channel, client *http.Client, dir string, manifest sandboxwire.Chunk) ([]byte, sandboxwire.Manifest, error) {
	if client == nil {
		client = http.DefaultClient
	}
	d := &downloader{ch: ch, client: client, urls: map[string]string{}}
	raw, err := d.chunk(ctx, manifest, sandboxwire.MaxManifestBytes)
	if err != nil {
		return nil, sandboxwire.Manifest{}, fmt.Errorf("the checkpoint's manifest: %w", err)
	}
	var m sandboxwire.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, m, fmt.Errorf("the checkpoint's manifest: %w", err)
	}
	if p := m.Problem(); p != "" {
		return nil, m, fmt.Errorf("the checkpoint's manifest: %s", p)
	}
	hashes := make([]string, 0)
	for _, c := range m.Chunks() {
		hashes = append(hashes, c.Hash)
	}
	if err := d.presign(ctx, hashes); err != nil {
		return nil, m, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, m, err
	}
	defer func() { _ = root.Close() }()
	var files []sandboxwire.Entry
	for _, e := range m.Entries {
		switch e.Type {
		case sandboxwire.EntryDir:
			if err := restoreDir(root, e); err != nil {
				return nil, m, err
			}
		case sandboxwire.EntryLink:
			if err := clear(root, e.Path); err != nil {
				return nil, m, err
			}
			if err := root.Symlink(e.Target, e.Path); err != nil {
				return nil, m, fmt.Errorf("restore %s: %w", e.Path, err)
			}
		case sandboxwire.EntryFile:
			files = append(files, e)
		}
	}
	if err := each(ctx, files, func(ctx context.Context, e sandboxwire.Entry) error {
		return d.file(ctx, root, e)
	}); err != nil {
		return nil, m, err
	}
	// Folders' modes last: a folder closed to writing is written into first.
	for _, e := range slices.Backward(m.Entries) {
		if e.Type == sandboxwire.EntryDir {
			if err := root.Chmod(e.Path, fs.FileMode(e.Mode)); err != nil {
				return nil, m, fmt.Errorf("restore %s: %w", e.Path, err)
			}
		}
	}
	var state []byte
	for _, c := range m.State {
		part, err := d.chunk(ctx, c, sandboxwire.ChunkSize)
		if err != nil {
			return nil, m, fmt.Errorf("the checkpoint's state: %w", err)
		}
		state = append(state, part...)
	}
	return state, m, nil
}

// restoreDir makes folder e (an existing one is kept; anything else of its
// name is replaced), open to its owner until its mode is set.
func restoreDir(root *os.Root, e sandboxwire.Entry) error {
	if fi, err := root.Lstat(e.Path); err == nil && fi.IsDir() {
		return nil
	}
	if err := clear(root, e.Path); err != nil {
		return err
	}
	if err := root.Mkdir(e.Path, 0o700); err != nil {
		return fmt.Errorf("restore %s: %w", e.Path, err)
	}
	return nil
}

// clear removes what is at p (a folder with all it holds), if anything.
func clear(root *os.Root, p string) error {
	if _, err := root.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := root.RemoveAll(p); err != nil {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	return nil
}

// downloader downloads the chunks of one agent's checkpoints.
type downloader struct {
	ch     Channel
	client *http.Client
	mu     sync.Mutex
	urls   map[string]string
}

// presign gets the download URLs of hashes, a request's worth at a time.
func (d *downloader) presign(ctx context.Context, hashes []string) error {
	for len(hashes) > 0 {
		batch := hashes[:min(len(hashes), sandboxwire.MaxChunksPerRequest)]
		hashes = hashes[len(batch):]
		var res sandboxwire.CheckpointDownloadsResponse
		if err := d.ch.Do(ctx, http.MethodPost, sandboxwire.RouteCheckpointDownloads, sandboxwire.CheckpointDownloadsRequest{Hashes: batch}, &res); err != nil {
			return fmt.Errorf("checkpoint downloads: %w", err)
		}
		d.mu.Lock()
		for _, t := range res.Downloads {
			d.urls[t.Hash] = t.URL
		}
		d.mu.Unlock()
	}
	return nil
}

// chunk downloads chunk c (at most max bytes) and checks its hash.
func (d *downloader) chunk(ctx context.Context, c sandboxwire.Chunk, max int64) ([]byte, error) {
	d.mu.Lock()
	u, ok := d.urls[c.Hash]
	d.mu.Unlock()
	if !ok {
		if err := d.presign(ctx, []string{c.Hash}); err != nil {
			return nil, err
		}
		d.mu.Lock()
		u, ok = d.urls[c.Hash]
		d.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("no download for chunk %s", c.Hash)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	res, err := d.client.Do(req)
	if err != nil {
		return nil, errors.New("the object store could not be reached") // its error names the signed URL
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("chunk %s: the object store answered %d", c.Hash, res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", c.Hash, err)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != c.Hash || int64(len(body)) != c.Size {
		return nil, fmt.Errorf("chunk %s is not what its hash says", c.Hash)
	}
	return body, nil
}

// file restores file e: its chunks into a new file beside it, renamed
// over it once whole.
func (d *downloader) file(ctx context.Context, root *os.Root, e sandboxwire.Entry) error {
	if fi, err := root.Lstat(e.Path); err == nil && fi.IsDir() {
		if err := root.RemoveAll(e.Path); err != nil {
			return fmt.Errorf("restore %s: %w", e.Path, err)
		}
	}
	tmp := path.Join(path.Dir(e.Path), ".ra-restore-"+path.Base(e.Path))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("restore %s: %w", e.Path, err)
	}
	for _, c := range e.Chunks {
		part, err := d.chunk(ctx, c, sandboxwire.ChunkSize)
		if err == nil {
			_, err = f.Write(part)
		}
		if err != nil {
			_ = f.Close()
			_ = root.Remove(tmp)
			return fmt.Errorf("restore %s: %w", e.Path, err)
		}
	}
	if err := f.Chmod(fs.FileMode(e.Mode)); err != nil {
		_ = f.Close()
		return fmt.Errorf("restore %s: %w", e.Path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("restore %s: %w", e.Path, err)
	}
	if err := root.Rename(tmp, e.Path); err != nil {
		return fmt.Errorf("restore %s: %w", e.Path, err)
	}
	return nil
}
