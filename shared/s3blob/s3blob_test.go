package s3blob_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/s3blob"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func store(t *testing.T) *s3blob.Store {
	t.Helper()
	set, _ := awstest.Resources(t)
	return s3blob.New(awsconfig.NewS3(awstest.Config(t)), set.Bucket.Name)
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s := store(t)
	body := []byte("agent output\n")
	if err := s.Put(t.Context(), "sessions/s1/outputs/a.txt", bytes.NewReader(body), int64(len(body)), "text/plain"); err != nil {
		t.Fatal(err)
	}
	r, obj, err := s.Get(t.Context(), "sessions/s1/outputs/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) || obj.Size != int64(len(body)) || obj.ContentType != "text/plain" {
		t.Errorf("got %q, %+v", got, obj)
	}
	if _, _, err := s.Get(t.Context(), "sessions/s1/outputs/missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("missing object: %v, want ErrNotFound", err)
	}
}

func TestListByPrefixPages(t *testing.T) {
	t.Parallel()
	s := store(t)
	for i := range 7 {
		key := fmt.Sprintf("sessions/s1/logs/%02d.log", i)
		if err := s.Put(t.Context(), key, strings.NewReader("x"), 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(t.Context(), "sessions/s2/logs/00.log", strings.NewReader("y"), 1, ""); err != nil {
		t.Fatal(err)
	}
	var keys []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("listing does not end")
		}
		page, err := s.List(t.Context(), "sessions/s1/", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Objects) > 3 {
			t.Fatalf("page of %d objects, limit 3", len(page.Objects))
		}
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(keys) != 7 || keys[0] != "sessions/s1/logs/00.log" || keys[6] != "sessions/s1/logs/06.log" {
		t.Errorf("listed %v", keys)
	}
}

func TestPresignedURLsWithPlainHTTP(t *testing.T) {
	t.Parallel()
	s := store(t)
	put, err := s.PresignPut(t.Context(), "sessions/s1/uploads/report.json", "application/json", 11, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if status := send(t, put, strings.NewReader(`{"ok":true}`)); status != http.StatusOK {
		t.Fatalf("presigned PUT: %d", status)
	}

	get, err := s.PresignGet(t.Context(), "sessions/s1/uploads/report.json", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(get, "X-Amz-Signature=") || !strings.Contains(get, "X-Amz-Expires=60") {
		t.Errorf("presigned GET URL %q is not signed for 60 s", get)
	}
	greq, err := http.NewRequestWithContext(t.Context(), http.MethodGet, get, nil)
	if err != nil {
		t.Fatal(err)
	}
	gres, err := http.DefaultClient.Do(greq)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gres.Body.Close() }()
	body, _ := io.ReadAll(gres.Body)
	if gres.StatusCode != http.StatusOK || string(body) != `{"ok":true}` {
		t.Errorf("presigned GET: %s %q", gres.Status, body)
	}
}

func TestRejectsUnsafeKeysAndTTLs(t *testing.T) {
	t.Parallel()
	s := store(t)
	for _, key := range []string{"", "/abs", "a/../b", "a//b", "a/./b", "..", "a/\x00", strings.Repeat("k", 1025)} {
		if err := s.Put(t.Context(), key, strings.NewReader("x"), 1, ""); err == nil {
			t.Errorf("Put(%q) accepted", key)
		}
		if _, err := s.PresignGet(t.Context(), key, time.Minute); err == nil {
			t.Errorf("PresignGet(%q) accepted", key)
		}
	}
	if _, err := s.PresignGet(t.Context(), "ok", 8*24*time.Hour); err == nil {
		t.Error("presign beyond MaxPresignTTL accepted")
	}
	if _, err := s.PresignPut(t.Context(), "ok", "", 1, 0); err == nil {
		t.Error("presign with zero TTL accepted")
	}
	for _, size := range []int64{-1, s3blob.MaxPutBytes + 1} {
		if _, err := s.PresignPut(t.Context(), "ok", "", size, time.Minute); err == nil {
			t.Errorf("presign of %d bytes accepted", size)
		}
	}
}

// send PUTs body to a presigned request with its headers and returns the status.
func send(t *testing.T, p blob.Presigned, body io.Reader) int {
	t.Helper()
	return awstest.Put(t, p.URL, p.Headers, body)
}

// TestPresignedPutsAreBoundedBySize: a presigned PUT takes exactly the length
// and type it was signed for; the object store (S3, or the emulators' front
// that checks as S3 does) refuses 2 MB to a URL presigned for 10 bytes.
func TestPresignedPutsAreBoundedBySize(t *testing.T) {
	t.Parallel()
	s := store(t)
	ten := bytes.Repeat([]byte("x"), 10)
	p, err := s.PresignPut(t.Context(), "sessions/s1/uploads/ten.txt", "text/plain", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	signed := strings.Split(u.Query().Get("X-Amz-SignedHeaders"), ";")
	if !slices.Contains(signed, "content-length") || !slices.Contains(signed, "content-type") {
		t.Errorf("signed headers %v lack the length or the type", signed)
	}
	if !maps.Equal(p.Headers, map[string]string{"Content-Length": "10", "Content-Type": "text/plain"}) {
		t.Errorf("headers to send: %v", p.Headers)
	}

	if status := send(t, p, bytes.NewReader(bytes.Repeat([]byte("x"), 2<<20))); status != http.StatusForbidden {
		t.Errorf("2 MB to a URL presigned for 10 bytes: %d, want 403", status)
	}
	if _, _, err := s.Get(t.Context(), "sessions/s1/uploads/ten.txt"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("after the refused PUT: %v, want no object", err)
	}
	if status := send(t, p, io.MultiReader(bytes.NewReader(ten))); status != http.StatusForbidden {
		t.Errorf("10 bytes chunked, with no length: %d, want 403", status)
	}
	other := blob.Presigned{URL: p.URL, Headers: map[string]string{"Content-Type": "text/html"}}
	if status := send(t, other, bytes.NewReader(ten)); status != http.StatusForbidden {
		t.Errorf("another type: %d, want 403", status)
	}
	if status := send(t, p, bytes.NewReader(ten)); status != http.StatusOK {
		t.Fatalf("the 10 bytes signed for: %d", status)
	}
	r, obj, err := s.Get(t.Context(), "sessions/s1/uploads/ten.txt")
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	if obj.Size != 10 || obj.ContentType != "text/plain" {
		t.Errorf("stored %+v", obj)
	}

	// S3 signs no length of zero: an empty upload is bound by its digest.
	empty, err := s.PresignPut(t.Context(), "sessions/s1/uploads/empty", "text/plain", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if status := send(t, empty, bytes.NewReader(ten)); status/100 == 2 {
		t.Errorf("10 bytes to a URL presigned for none: %d", status)
	}
	if status := send(t, empty, http.NoBody); status != http.StatusOK {
		t.Errorf("the empty body signed for: %d", status)
	}
}

// A PUT presigned with the bytes' SHA-256 signs the checksum too, stores
// what was signed for, and the checksum is read back where the store keeps
// it (S3; an emulator may keep none: nil). DeletePrefix deletes what is
// under a folder and nothing beside it.
func TestChecksummedPutsAndDeletePrefix(t *testing.T) {
	t.Parallel()
	s := store(t)
	body := []byte("a chunk of a workspace file")
	sum := sha256.Sum256(body)
	p, err := s.PresignPutSHA256(t.Context(), "checkpoints/s1/chunks/a", int64(len(body)), sum[:], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	if signed := strings.Split(u.Query().Get("X-Amz-SignedHeaders"), ";"); !slices.Contains(signed, "x-amz-checksum-sha256") || !slices.Contains(signed, "content-length") {
		t.Errorf("signed headers %v lack the checksum or the length", signed)
	}
	if _, err := s.PresignPutSHA256(t.Context(), "checkpoints/s1/chunks/b", 1, sum[:4], time.Minute); err == nil {
		t.Error("a checksum of 4 bytes was presigned")
	}
	if status := send(t, p, bytes.NewReader(body)); status != http.StatusOK {
		t.Fatalf("the bytes signed for: %d", status)
	}
	got, size, err := s.StoredSHA256(t.Context(), "checkpoints/s1/chunks/a")
	if err != nil || size != int64(len(body)) || (got != nil && !bytes.Equal(got, sum[:])) {
		t.Errorf("stored checksum %x, size %d, %v", got, size, err)
	}
	if _, _, err := s.StoredSHA256(t.Context(), "checkpoints/s1/chunks/missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("a missing chunk: %v", err)
	}
	for i := range 3 {
		if err := s.Put(t.Context(), fmt.Sprintf("checkpoints/s1/records/%d", i), strings.NewReader("x"), 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(t.Context(), "checkpoints/s10/records/0", strings.NewReader("x"), 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePrefix(t.Context(), "checkpoints/s1"); err == nil {
		t.Error("a prefix that is not a folder was deleted under")
	}
	if err := s.DeletePrefix(t.Context(), "checkpoints/s1/"); err != nil {
		t.Fatal(err)
	}
	left, err := s.List(t.Context(), "checkpoints/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Objects) != 1 || left.Objects[0].Key != "checkpoints/s10/records/0" {
		t.Errorf("left %+v, want the other folder's object", left.Objects)
	}
}
