package checkpoint_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

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
	put := func(id string, data []byte) sandboxwire.Chunk {
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
