package s3blob_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	put, err := s.PresignPut(t.Context(), "sessions/s1/uploads/report.json", "application/json", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, put, strings.NewReader(`{"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: %s", res.Status)
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
	if _, err := s.PresignPut(t.Context(), "ok", "", 0); err == nil {
		t.Error("presign with zero TTL accepted")
	}
}
