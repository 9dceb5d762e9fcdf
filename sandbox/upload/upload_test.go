package upload_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/sandbox/contract"
	"github.com/remote-agents/remote-agents/sandbox/upload"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/s3blob"
)

// The uploads go to the emulators' S3, whose front checks presigned URLs as
// S3 does, through the URLs the platform's own presigner hands out.
func TestMain(m *testing.M) { awstest.Main(m) }

func store(t *testing.T) *s3blob.Store {
	t.Helper()
	set, _ := awstest.Resources(t)
	return s3blob.New(awsconfig.NewS3(awstest.Config(t)), set.Bucket.Name)
}

// file writes content to a file of its own and returns its path.
func file(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// get reads back the object under key.
func get(t *testing.T, s *s3blob.Store, key string) []byte {
	t.Helper()
	r, _, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Both callers' ways in, an empty file and one with content: the store takes
// each (an empty file sent chunked, without a Content-Length, was refused).
func TestPutTakesEmptyAndNonEmptyFiles(t *testing.T) {
	t.Parallel()
	s := store(t)
	ways := []struct {
		name string
		put  func(ctx context.Context, url, path string, headers map[string]string) error
	}{
		{"Put", func(ctx context.Context, url, path string, headers map[string]string) error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			info, err := f.Stat()
			if err != nil {
				return err
			}
			return upload.Put(ctx, http.DefaultClient, url, f, info.Size(), headers)
		}},
		{"verify's Uploader", (&contract.Uploader{}).Put},
	}
	files := []struct {
		name, content string
	}{
		{"empty.txt", ""},
		{"evidence.txt", "the tests pass\n"},
	}
	for _, way := range ways {
		for _, f := range files {
			t.Run(way.name+"/"+f.name, func(t *testing.T) {
				key := "uploads/" + way.name + "/" + f.name
				p, err := s.PresignPut(t.Context(), key, upload.ContentType(f.name), int64(len(f.content)), time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if err := way.put(t.Context(), p.URL, file(t, f.name, f.content), p.Headers); err != nil {
					t.Fatalf("upload of %d bytes: %v", len(f.content), err)
				}
				if got := get(t, s, key); !bytes.Equal(got, []byte(f.content)) {
					t.Errorf("stored %q, want %q", got, f.content)
				}
			})
		}
	}
}

// A body of another length than the URL was signed for is refused, and the
// error says what the store answered, not the URL (it holds a signature).
func TestPutReportsTheStoresRefusal(t *testing.T) {
	t.Parallel()
	s := store(t)
	p, err := s.PresignPut(t.Context(), "uploads/short.txt", "text/plain", 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	err = upload.Put(t.Context(), http.DefaultClient, p.URL, bytes.NewReader([]byte("abc")), 3, p.Headers)
	var se *upload.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusForbidden {
		t.Fatalf("error %v, want the store's 403", err)
	}
	if bytes.Contains([]byte(err.Error()), []byte("Signature")) {
		t.Errorf("error %q shows the URL", err)
	}
}

// A store that cannot be reached is said so, without the URL.
func TestPutReportsAnUnreachableStore(t *testing.T) {
	t.Parallel()
	url := "http://127.0.0.1:1/bucket/key?X-Amz-Signature=secret"
	err := upload.Put(t.Context(), http.DefaultClient, url, bytes.NewReader(nil), 0, nil)
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("secret")) {
		t.Errorf("error %v, want one without the URL", err)
	}
}

func TestContentType(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"a.txt", "text/plain; charset=utf-8"},
		{"snapshot", "application/octet-stream"},
		{"report.json", "application/json"},
	}
	for _, tt := range tests {
		if got := upload.ContentType(tt.name); got != tt.want {
			t.Errorf("ContentType(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
