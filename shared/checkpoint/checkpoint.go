// Package checkpoint keeps agents' checkpoints (sandboxwire's Checkpoint):
// content-addressed chunks and the records of committed checkpoints, under
// one folder of the bucket per agent. It presigns what a sandbox uploads and
// downloads, and commits a checkpoint only once every chunk its manifest
// names is verified stored: by the checksum S3 keeps with a chunk, or,
// where the store keeps none, by reading it back. Chunks are per agent, so
// deleting an agent's folder deletes all of its checkpoints and nothing of
// another's.
package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Objects is the bucket checkpoints are kept in (s3blob.Store has it).
type Objects interface {
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	Get(ctx context.Context, key string) (io.ReadCloser, blob.Object, error)
	ListAfter(ctx context.Context, prefix, startAfter string, limit int) (blob.Page, error)
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
	PresignPutSHA256(ctx context.Context, key string, size int64, sum []byte, ttl time.Duration) (blob.Presigned, error)
	StoredSHA256(ctx context.Context, key string) (sum []byte, size int64, err error)
	Copy(ctx context.Context, src, dst string) error
	Delete(ctx context.Context, keys ...string) error
	DeletePrefix(ctx context.Context, prefix string) error
}

// Prefix is the folder of agent id's checkpoints.
func Prefix(id string) string { return "checkpoints/" + id + "/" }

// chunkKey is where agent id's chunk hash is.
func chunkKey(id, hash string) string { return Prefix(id) + "chunks/" + hash }

// recordKey is where agent id's checkpoint cp is recorded.
func recordKey(id, cp string) string { return Prefix(id) + "records/" + cp + ".json" }

// verifiers is how many chunks a commit verifies at once.
const verifiers = 16

// Service keeps the checkpoints.
type Service struct {
	Objects Objects
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ErrNotFound: no such checkpoint.
var ErrNotFound = errors.New("checkpoint not found")

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Uploads presigns the uploads of chunks for agent id: data chunks of at
// most sandboxwire.ChunkSize, a manifest of at most MaxManifestBytes.
func (s *Service) Uploads(ctx context.Context, id string, chunks []sandboxwire.Chunk) ([]sandboxwire.ChunkTransfer, error) {
	if len(chunks) == 0 || len(chunks) > sandboxwire.MaxChunksPerRequest {
		return nil, apierror.New(apierror.InvalidRequest, "Ask for 1 to %d chunks.", sandboxwire.MaxChunksPerRequest)
	}
	out := make([]sandboxwire.ChunkTransfer, 0, len(chunks))
	for _, c := range chunks {
		if p := c.Problem(sandboxwire.MaxManifestBytes); p != "" {
			return nil, apierror.New(apierror.InvalidRequest, "%s", p)
		}
		sum, _ := hex.DecodeString(c.Hash)
		p, err := s.Objects.PresignPutSHA256(ctx, chunkKey(id, c.Hash), c.Size, sum, sandboxwire.CheckpointURLTTL)
		if err != nil {
			return nil, fmt.Errorf("checkpoint uploads of %s: %w", id, err)
		}
		out = append(out, sandboxwire.ChunkTransfer{Hash: c.Hash, URL: p.URL, Headers: p.Headers})
	}
	return out, nil
}

// Downloads presigns the downloads of agent id's chunks by hash.
func (s *Service) Downloads(ctx context.Context, id string, hashes []string) ([]sandboxwire.ChunkTransfer, error) {
	if len(hashes) == 0 || len(hashes) > sandboxwire.MaxChunksPerRequest {
		return nil, apierror.New(apierror.InvalidRequest, "Ask for 1 to %d chunks.", sandboxwire.MaxChunksPerRequest)
	}
	out := make([]sandboxwire.ChunkTransfer, 0, len(hashes))
	for _, h := range hashes {
		if !sandboxwire.ValidHash(h) {
			return nil, apierror.New(apierror.InvalidRequest, "chunk hash %q is not 64 lowercase hex digits", h)
		}
		u, err := s.Objects.PresignGet(ctx, chunkKey(id, h), sandboxwire.CheckpointURLTTL)
		if err != nil {
			return nil, fmt.Errorf("checkpoint downloads of %s: %w", id, err)
		}
		out = append(out, sandboxwire.ChunkTransfer{Hash: h, URL: u})
	}
	return out, nil
}

// Commit commits the checkpoint of agent id's launch generation whose
// manifest is the chunk manifest, once every chunk it names is verified
// stored; prev is the agent's last committed checkpoint ("" none), whose
// chunks were verified when it was. The manifest that is not one, a chunk
// missing or not what its hash says, is 422 checkpoint_invalid: nothing is
// recorded, and the last checkpoint stays the last.
func (s *Service) Commit(ctx context.Context, id string, gen int, prev string, manifest sandboxwire.Chunk, reason string) (sandboxwire.Checkpoint, error) {
	if p := manifest.Problem(sandboxwire.MaxManifestBytes); p != "" {
		return sandboxwire.Checkpoint{}, apierror.New(apierror.InvalidRequest, "manifest: %s", p)
	}
	if !slices.Contains(sandboxwire.CheckpointReasons, reason) {
		return sandboxwire.Checkpoint{}, apierror.New(apierror.InvalidRequest, "reason %q is not one of %s", reason, strings.Join(sandboxwire.CheckpointReasons, ", "))
	}
	m, err := s.readManifest(ctx, id, manifest)
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	known := map[string]bool{}
	if prev != "" {
		old, err := s.Get(ctx, id, prev)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return sandboxwire.Checkpoint{}, err
		}
		if err == nil {
			pm, err := s.readManifest(ctx, id, old.Manifest)
			if err != nil {
				return sandboxwire.Checkpoint{}, fmt.Errorf("the last checkpoint %s of %s: %w", prev, id, err)
			}
			for _, c := range pm.Chunks() {
				known[c.Hash] = true
			}
		}
	}
	cp := sandboxwire.Checkpoint{ID: newID(s.now()), Manifest: manifest, Reason: reason, CreatedAt: s.now().UTC(), Generation: gen, NewBytes: manifest.Size}
	var fresh []sandboxwire.Chunk
	for _, c := range m.Chunks() {
		if !known[c.Hash] {
			fresh = append(fresh, c)
			cp.NewBytes += c.Size
		}
	}
	for _, e := range m.Entries {
		if e.Type == sandboxwire.EntryFile {
			cp.Files++
			cp.Bytes += e.Size
		}
	}
	for _, c := range m.State {
		cp.Bytes += c.Size
	}
	if err := s.verify(ctx, id, fresh); err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	raw, err := json.Marshal(cp)
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	if err := s.Objects.Put(ctx, recordKey(id, cp.ID), bytes.NewReader(raw), int64(len(raw)), "application/json"); err != nil {
		return sandboxwire.Checkpoint{}, fmt.Errorf("record checkpoint %s of %s: %w", cp.ID, id, err)
	}
	return cp, nil
}

// invalid is a commit refused for what the sandbox sent.
func invalid(format string, args ...any) error {
	return apierror.New(apierror.CheckpointInvalid, format, args...)
}

// readManifest reads and checks the manifest chunk c of agent id.
func (s *Service) readManifest(ctx context.Context, id string, c sandboxwire.Chunk) (sandboxwire.Manifest, error) {
	raw, err := s.read(ctx, id, c, sandboxwire.MaxManifestBytes)
	if err != nil {
		return sandboxwire.Manifest{}, err
	}
	var m sandboxwire.Manifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return sandboxwire.Manifest{}, invalid("The manifest is not one: %s", err.Error())
	}
	if p := m.Problem(); p != "" {
		return sandboxwire.Manifest{}, invalid("The manifest is not valid: %s", p)
	}
	return m, nil
}

// Manifest reads the manifest of agent id's checkpoint cp.
func (s *Service) Manifest(ctx context.Context, id string, cp sandboxwire.Checkpoint) (sandboxwire.Manifest, error) {
	return s.readManifest(ctx, id, cp.Manifest)
}

// read reads chunk c of agent id (at most max bytes), checking its hash.
func (s *Service) read(ctx context.Context, id string, c sandboxwire.Chunk, max int64) ([]byte, error) {
	rc, obj, err := s.Objects.Get(ctx, chunkKey(id, c.Hash))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, invalid("Chunk %s was not uploaded.", c.Hash)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	if obj.Size != c.Size || obj.Size > max {
		return nil, invalid("Chunk %s holds %d bytes, not %d.", c.Hash, obj.Size, c.Size)
	}
	raw, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, fmt.Errorf("read chunk %s of %s: %w", c.Hash, id, err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != c.Hash || int64(len(raw)) != c.Size {
		return nil, invalid("Chunk %s is not what its hash says.", c.Hash)
	}
	return raw, nil
}

// verify checks that each of chunks is stored with the bytes its hash
// says, verifiers at a time: by the checksum the store keeps, else by
// reading it back.
func (s *Service) verify(ctx context.Context, id string, chunks []sandboxwire.Chunk) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(verifiers)
	for _, c := range chunks {
		g.Go(func() error { return s.verifyOne(ctx, id, c) })
	}
	return g.Wait()
}

func (s *Service) verifyOne(ctx context.Context, id string, c sandboxwire.Chunk) error {
	sum, size, err := s.Objects.StoredSHA256(ctx, chunkKey(id, c.Hash))
	if errors.Is(err, blob.ErrNotFound) {
		return invalid("Chunk %s was not uploaded.", c.Hash)
	}
	if err != nil {
		return err
	}
	if size != c.Size {
		return invalid("Chunk %s holds %d bytes, not %d.", c.Hash, size, c.Size)
	}
	if sum != nil {
		if hex.EncodeToString(sum) != c.Hash {
			return invalid("Chunk %s is not what its hash says.", c.Hash)
		}
		return nil
	}
	_, err = s.read(ctx, id, c, sandboxwire.ChunkSize)
	return err
}

// Get returns agent id's checkpoint cp.
func (s *Service) Get(ctx context.Context, id, cp string) (sandboxwire.Checkpoint, error) {
	if !ValidID(cp) {
		return sandboxwire.Checkpoint{}, ErrNotFound
	}
	rc, _, err := s.Objects.Get(ctx, recordKey(id, cp))
	if errors.Is(err, blob.ErrNotFound) {
		return sandboxwire.Checkpoint{}, ErrNotFound
	}
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	defer func() { _ = rc.Close() }()
	var out sandboxwire.Checkpoint
	if err := json.NewDecoder(io.LimitReader(rc, 64<<10)).Decode(&out); err != nil {
		return sandboxwire.Checkpoint{}, fmt.Errorf("checkpoint %s of %s: %w", cp, id, err)
	}
	return out, nil
}

// List returns agent id's checkpoints, oldest first, up to limit after
// the checkpoint after ("" from the first), and the id to go on after
// ("" none).
func (s *Service) List(ctx context.Context, id, after string, limit int) ([]sandboxwire.Checkpoint, string, error) {
	startAfter := ""
	if after != "" {
		if !ValidID(after) {
			return nil, "", apierror.New(apierror.InvalidRequest, "cursor %q is not a checkpoint id", after)
		}
		startAfter = recordKey(id, after)
	}
	page, err := s.Objects.ListAfter(ctx, Prefix(id)+"records/", startAfter, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]sandboxwire.Checkpoint, 0, len(page.Objects))
	for _, o := range page.Objects {
		cp, err := s.Get(ctx, id, strings.TrimSuffix(strings.TrimPrefix(o.Key, Prefix(id)+"records/"), ".json"))
		if err != nil {
			return nil, "", err
		}
		out = append(out, cp)
	}
	next := ""
	if page.Next != "" && len(out) > 0 {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// Delete deletes every checkpoint of agent id.
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.Objects.DeletePrefix(ctx, Prefix(id))
}

// PruneSlack is how long past its retention a checkpoint may be kept: an
// agent's expired checkpoints are pruned together, at most once in it, so
// that the chunks the rest still use are found once a day, not at every
// commit.
const PruneSlack = 24 * time.Hour

// Prune deletes agent id's checkpoints made before cutoff, except keep (its
// last, which is never pruned), once the oldest of them is PruneSlack past
// cutoff, then the chunks no checkpoint left uses. It returns how many
// checkpoints it deleted. No upload of id's may be under way (commits are
// one at a time, and this runs after one): a chunk uploaded for a
// checkpoint not committed yet would be taken for one no checkpoint uses.
func (s *Service) Prune(ctx context.Context, id, keep string, cutoff time.Time) (int, error) {
	records, err := s.keys(ctx, Prefix(id)+"records/")
	if err != nil {
		return 0, err
	}
	var expired, kept []string
	for _, k := range records {
		cp := strings.TrimSuffix(strings.TrimPrefix(k, Prefix(id)+"records/"), ".json")
		if at, ok := idTime(cp); ok && at.Before(cutoff) && cp != keep {
			expired = append(expired, cp)
		} else {
			kept = append(kept, cp)
		}
	}
	if len(expired) == 0 {
		return 0, nil
	}
	if oldest, _ := idTime(expired[0]); !oldest.Before(cutoff.Add(-PruneSlack)) {
		return 0, nil
	}
	used := map[string]bool{}
	for _, cp := range kept {
		rec, err := s.Get(ctx, id, cp)
		if err != nil {
			return 0, fmt.Errorf("prune %s: %w", id, err)
		}
		m, err := s.readManifest(ctx, id, rec.Manifest)
		if err != nil {
			return 0, fmt.Errorf("prune %s: checkpoint %s: %w", id, cp, err)
		}
		used[rec.Manifest.Hash] = true
		for _, c := range m.Chunks() {
			used[c.Hash] = true
		}
	}
	// The records first: a checkpoint is never left naming a chunk gone.
	gone := make([]string, 0, len(expired))
	for _, cp := range expired {
		gone = append(gone, recordKey(id, cp))
	}
	if err := s.Objects.Delete(ctx, gone...); err != nil {
		return 0, fmt.Errorf("prune %s: %w", id, err)
	}
	chunks, err := s.keys(ctx, Prefix(id)+"chunks/")
	if err != nil {
		return len(expired), err
	}
	unused := slices.DeleteFunc(chunks, func(k string) bool { return used[strings.TrimPrefix(k, Prefix(id)+"chunks/")] })
	if err := s.Objects.Delete(ctx, unused...); err != nil {
		return len(expired), fmt.Errorf("prune %s: %w", id, err)
	}
	return len(expired), nil
}

// keys lists every key under prefix, in order.
func (s *Service) keys(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	after := ""
	for {
		page, err := s.Objects.ListAfter(ctx, prefix, after, blob.MaxListSize)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Objects {
			out = append(out, o.Key)
		}
		if page.Next == "" || len(page.Objects) == 0 {
			return out, nil
		}
		after = page.Next
	}
}

// Fork copies agent from's checkpoint cp to agent to, as to's first: its
// chunks, then its record (under the same id), so that to's checkpoints
// owe nothing to from's.
func (s *Service) Fork(ctx context.Context, from, to string, cp sandboxwire.Checkpoint) (sandboxwire.Checkpoint, error) {
	m, err := s.readManifest(ctx, from, cp.Manifest)
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	for _, c := range append(m.Chunks(), cp.Manifest) {
		if err := s.Objects.Copy(ctx, chunkKey(from, c.Hash), chunkKey(to, c.Hash)); err != nil {
			return sandboxwire.Checkpoint{}, fmt.Errorf("fork %s of %s: %w", cp.ID, from, err)
		}
	}
	cp.Generation = 0
	raw, err := json.Marshal(cp)
	if err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	if err := s.Objects.Put(ctx, recordKey(to, cp.ID), bytes.NewReader(raw), int64(len(raw)), "application/json"); err != nil {
		return sandboxwire.Checkpoint{}, err
	}
	return cp, nil
}

// newID is a checkpoint id made at now: "cp_", the time (so that ids sort
// as they were made) and 8 random hex digits.
func newID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "cp_" + now.UTC().Format(idLayout) + "_" + hex.EncodeToString(b[:])
}

// idLayout is the time in a checkpoint id.
const idLayout = "20060102T150405.000000000Z"

// ValidID reports whether cp has the form of a checkpoint id.
func ValidID(cp string) bool {
	if _, ok := idTime(cp); !ok {
		return false
	}
	hexPart := cp[len("cp_")+len(idLayout)+1:]
	_, err := hex.DecodeString(hexPart)
	return err == nil && strings.ToLower(hexPart) == hexPart
}

// idTime is when checkpoint cp was made, by its id.
func idTime(cp string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(cp, "cp_")
	if !ok || len(rest) != len(idLayout)+9 || rest[len(idLayout)] != '_' {
		return time.Time{}, false
	}
	at, err := time.Parse(idLayout, rest[:len(idLayout)])
	return at, err == nil
}
