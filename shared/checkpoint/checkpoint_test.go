package checkpoint_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func service(t *testing.T) (*checkpoint.Service, *s3blob.Store) {
	t.Helper()
	set, _ := awstest.Resources(t)
	store := s3blob.New(awsconfig.NewS3(awstest.Config(t)), set.Bucket.Name)
	return &checkpoint.Service{Objects: store}, store
}

// Nothing is committed that is not stored as its hash says: a chunk never
// uploaded, or other bytes under its name, is 422 checkpoint_invalid, and
// the last checkpoint stays the last.
func TestCommitVerifiesEveryNewChunk(t *testing.T) {
	t.Parallel()
	svc, store := service(t)
	ctx := t.Context()
	put := func(id string, data []byte) sandboxwire.Chunk { return upload(t, svc, id, data) }
	file := []byte("the file")
	sum := sha256.Sum256(file)
	fileChunk := sandboxwire.Chunk{Hash: hex.EncodeToString(sum[:]), Size: int64(len(file))}
	manifest := []byte(`{"version":1,"entries":[{"path":"f","type":"file","mode":420,"size":8,"chunks":[{"hash":"` + fileChunk.Hash + `","size":8}]}]}`)
	m := put("agent", manifest)
	if _, err := svc.Commit(ctx, "agent", 1, "", m, sandboxwire.CheckpointPause); apierror.CodeOf(err) != apierror.CheckpointInvalid || !strings.Contains(err.Error(), "was not uploaded") {
		t.Errorf("a chunk never uploaded: %v", err)
	}
	// Other bytes under the chunk's name (written past the presigned URL).
	if err := store.Put(ctx, checkpoint.Prefix("agent")+"chunks/"+fileChunk.Hash, strings.NewReader("tampered"), 8, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Commit(ctx, "agent", 1, "", m, sandboxwire.CheckpointPause); apierror.CodeOf(err) != apierror.CheckpointInvalid || !strings.Contains(err.Error(), "not what its hash says") {
		t.Errorf("a tampered chunk: %v", err)
	}
	put("agent", file)
	cp, err := svc.Commit(ctx, "agent", 1, "", m, sandboxwire.CheckpointPause)
	if err != nil || cp.Files != 1 || cp.Bytes != 8 || cp.NewBytes != 8+m.Size {
		t.Fatalf("the whole checkpoint: %+v, %v", cp, err)
	}
	for name, bad := range map[string]string{
		"escape":       `{"version":1,"entries":[{"path":"../x","type":"dir","mode":493}]}`,
		"before dir":   `{"version":1,"entries":[{"path":"a/b","type":"dir","mode":493}]}`,
		"twice":        `{"version":1,"entries":[{"path":"a","type":"dir","mode":493},{"path":"a","type":"dir","mode":493}]}`,
		"link out":     `{"version":1,"entries":[{"path":"l","type":"link","mode":511,"target":"../../etc"}]}`,
		"size":         `{"version":1,"entries":[{"path":"f","type":"file","mode":420,"size":9,"chunks":[{"hash":"` + fileChunk.Hash + `","size":8}]}]}`,
		"version":      `{"version":2,"entries":[]}`,
		"unknown type": `{"version":1,"entries":[{"path":"p","type":"fifo","mode":420}]}`,
		"extra field":  `{"version":1,"entries":[],"owner":"root"}`,
	} {
		c := put("agent", []byte(bad))
		if _, err := svc.Commit(ctx, "agent", 1, cp.ID, c, sandboxwire.CheckpointPeriodic); apierror.CodeOf(err) != apierror.CheckpointInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	if list, _, err := svc.List(ctx, "agent", "", 0); err != nil || len(list) != 1 || list[0].ID != cp.ID {
		t.Errorf("after refused commits: %+v, %v", list, err)
	}
	if _, err := svc.Uploads(ctx, "agent", []sandboxwire.Chunk{{Hash: "../x", Size: 1}}); apierror.CodeOf(err) != apierror.InvalidRequest {
		t.Errorf("a hash that is a path: %v", err)
	}
	if _, err := svc.Downloads(ctx, "agent", []string{strings.Repeat("A", 64)}); apierror.CodeOf(err) != apierror.InvalidRequest {
		t.Errorf("an upper-case hash: %v", err)
	}
	if _, err := svc.Commit(ctx, "agent", 1, "", m, "because"); apierror.CodeOf(err) != apierror.InvalidRequest {
		t.Errorf("an unknown reason: %v", err)
	}
}

// upload uploads data as a chunk of agent id, as a sandbox does.
func upload(t *testing.T, svc *checkpoint.Service, id string, data []byte) sandboxwire.Chunk {
	t.Helper()
	ctx := t.Context()
	sum := sha256.Sum256(data)
	c := sandboxwire.Chunk{Hash: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	ups, err := svc.Uploads(ctx, id, []sandboxwire.Chunk{c})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, ups[0].URL, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ups[0].Headers {
		req.Header.Set(k, v)
	}
	req.ContentLength = int64(len(data))
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("upload: %v %v", res, err)
	}
	_ = res.Body.Close()
	return c
}

// Checkpoints past their retention are pruned with the chunks only they
// used, once the oldest is a day past it; the last is never pruned, and
// what the kept ones use stays.
func TestPruneKeepsTheLastAndWhatTheRestUse(t *testing.T) {
	t.Parallel()
	svc, store := service(t)
	ctx := t.Context()
	day0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := day0
	svc.Now = func() time.Time { return now }
	const agent = "prune-agent"
	// commit commits a checkpoint of files (name → content) made at day.
	prev := ""
	commit := func(day float64, files map[string]string) sandboxwire.Checkpoint {
		now = day0.Add(time.Duration(day * float64(24*time.Hour)))
		m := sandboxwire.Manifest{Version: 1}
		for _, name := range slices.Sorted(maps.Keys(files)) {
			c := upload(t, svc, agent, []byte(files[name]))
			m.Entries = append(m.Entries, sandboxwire.Entry{Path: name, Type: sandboxwire.EntryFile, Mode: 0o644, Size: c.Size, Chunks: []sandboxwire.Chunk{c}})
		}
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := svc.Commit(ctx, agent, 1, prev, upload(t, svc, agent, raw), sandboxwire.CheckpointPeriodic)
		if err != nil {
			t.Fatal(err)
		}
		prev = cp.ID
		return cp
	}
	chunks := func() []string {
		page, err := store.ListAfter(ctx, checkpoint.Prefix(agent)+"chunks/", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range page.Objects {
			out = append(out, strings.TrimPrefix(o.Key, checkpoint.Prefix(agent)+"chunks/"))
		}
		return out
	}
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	a := commit(0, map[string]string{"one": "first", "two": "shared"})
	b := commit(1, map[string]string{"two": "shared", "three": "third"})
	c := commit(8.5, map[string]string{"three": "third", "four": "fourth"})
	retention := 7 * 24 * time.Hour
	// Day 7.5: a is half a day past its retention, within the slack:
	// nothing is pruned yet (from day 8, a and b together).
	now = day0.Add(7*24*time.Hour + 12*time.Hour)
	if n, err := svc.Prune(ctx, agent, c.ID, now.Add(-retention)); err != nil || n != 0 {
		t.Fatalf("within the slack: pruned %d, %v", n, err)
	}
	now = day0.Add(9 * 24 * time.Hour)
	n, err := svc.Prune(ctx, agent, c.ID, now.Add(-retention))
	if err != nil || n != 2 {
		t.Fatalf("past it: pruned %d, %v; want a and b", n, err)
	}
	list, _, err := svc.List(ctx, agent, "", 0)
	if err != nil || len(list) != 1 || list[0].ID != c.ID {
		t.Fatalf("left: %+v, %v; want only %s", list, err, c.ID)
	}
	want := []string{hash("third"), hash("fourth"), c.Manifest.Hash}
	slices.Sort(want)
	if got := chunks(); !slices.Equal(got, want) {
		t.Errorf("chunks left: %v; want those of %s only: %v", got, c.ID, want)
	}
	for _, gone := range []string{a.ID, b.ID} {
		if _, err := svc.Get(ctx, agent, gone); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("pruned %s: %v", gone, err)
		}
	}
	// The last is kept however old.
	now = day0.Add(400 * 24 * time.Hour)
	if n, err := svc.Prune(ctx, agent, c.ID, now.Add(-retention)); err != nil || n != 0 {
		t.Errorf("the last alone: pruned %d, %v", n, err)
	}
	if _, err := svc.Manifest(ctx, agent, c); err != nil {
		t.Errorf("the last's manifest: %v", err)
	}
}
