package s3sig_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/remote-agents/remote-agents/localstack/s3sig"
)

// front serves a Checker in front of a handler that counts what reaches it,
// and presigns with the SDK against it.
type front struct {
	url     string
	reached atomic.Int32
	now     time.Time
	presign *s3.PresignClient
}

func newFront(t *testing.T, accessKey string) *front {
	t.Helper()
	f := &front{now: time.Now()}
	c := s3sig.Checker{AccessKeyID: "test", SecretAccessKey: "secret", Now: func() time.Time { return f.now }}
	srv := httptest.NewServer(c.Front(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.reached.Add(1)
	})))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, "secret", ""),
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
	})
	f.presign = s3.NewPresignClient(client)
	return f
}

func (f *front) put(t *testing.T, key string, size int64, contentType string) string {
	t.Helper()
	req, err := f.presign.PresignPutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("b"), Key: aws.String(key), ContentLength: aws.Int64(size), ContentType: aws.String(contentType),
	}, s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return req.URL
}

// send makes a request and returns its status and S3 error code ("" if none).
func send(t *testing.T, method, u string, body io.Reader, length int64, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var e struct{ Code string }
	raw, _ := io.ReadAll(res.Body)
	_ = xml.Unmarshal(raw, &e)
	return res.StatusCode, e.Code
}

func TestPresignedPutsAreCheckedAsS3ChecksThem(t *testing.T) {
	t.Parallel()
	f := newFront(t, "test")
	ten := bytes.Repeat([]byte("x"), 10)
	big := bytes.Repeat([]byte("x"), 2<<20)
	key := "sessions/s 1/uploads/ünïcode+(1).txt"
	for _, c := range []struct {
		name    string
		body    []byte
		length  int64 // -1: chunked, no Content-Length
		header  []string
		status  int
		code    string
		reaches bool
	}{
		{"the length and type signed", ten, 10, []string{"Content-Type", "text/plain"}, 200, "", true},
		{"2 MB to a URL signed for 10 bytes", big, int64(len(big)), []string{"Content-Type", "text/plain"}, 403, "SignatureDoesNotMatch", false},
		{"fewer bytes than signed", ten[:5], 5, []string{"Content-Type", "text/plain"}, 403, "SignatureDoesNotMatch", false},
		{"another type", ten, 10, []string{"Content-Type", "text/html"}, 403, "SignatureDoesNotMatch", false},
		{"no type", ten, 10, nil, 403, "SignatureDoesNotMatch", false},
		{"a chunked body", big, -1, []string{"Content-Type", "text/plain"}, 403, "SignatureDoesNotMatch", false},
	} {
		before := f.reached.Load()
		var body io.Reader = bytes.NewReader(c.body)
		if c.length < 0 {
			body = io.MultiReader(body) // unknown length: sent chunked
		}
		status, code := send(t, http.MethodPut, f.put(t, key, 10, "text/plain"), body, c.length, c.header...)
		if status != c.status || code != c.code || (f.reached.Load() > before) != c.reaches {
			t.Errorf("%s: %d %q (reached the store: %v), want %d %q", c.name, status, code, f.reached.Load() > before, c.status, c.code)
		}
	}
}

func TestPresignedURLsCannotBeAlteredReusedLateOrForged(t *testing.T) {
	t.Parallel()
	f := newFront(t, "test")
	signed := f.put(t, "k", 3, "text/plain")
	ok := func(u string) (int, string) {
		return send(t, http.MethodPut, u, strings.NewReader("abc"), 3, "Content-Type", "text/plain")
	}
	if status, code := ok(signed); status != 200 {
		t.Fatalf("signed request: %d %s", status, code)
	}
	alter := func(k, v string) string {
		u, _ := url.Parse(signed)
		q := u.Query()
		q.Set(k, v)
		u.RawQuery = q.Encode()
		return u.String()
	}
	if status, code := ok(alter("X-Amz-Expires", "604800")); status != 403 || code != "SignatureDoesNotMatch" {
		t.Errorf("a longer lifetime: %d %q", status, code)
	}
	if status, code := ok(strings.Replace(signed, "/b/k?", "/b/other?", 1)); status != 403 || code != "SignatureDoesNotMatch" {
		t.Errorf("another key: %d %q", status, code)
	}
	if status, code := send(t, http.MethodGet, signed, nil, 0); status != 403 || code != "SignatureDoesNotMatch" {
		t.Errorf("another method: %d %q", status, code)
	}
	if status, code := ok(alter("X-Amz-Algorithm", "AWS4-HMAC-SHA1")); status != 400 || code != "AuthorizationQueryParametersError" {
		t.Errorf("another algorithm: %d %q", status, code)
	}
	f.now = f.now.Add(2 * time.Minute)
	if status, code := ok(signed); status != 403 || code != "AccessDenied" {
		t.Errorf("expired: %d %q", status, code)
	}

	forged := newFront(t, "someone-else")
	if status, code := send(t, http.MethodPut, forged.put(t, "k", 3, "text/plain"), strings.NewReader("abc"), 3, "Content-Type", "text/plain"); status != 403 || code != "InvalidAccessKeyId" {
		t.Errorf("another access key: %d %q", status, code)
	}
}

func TestRequestsWithoutAQuerySignaturePass(t *testing.T) {
	t.Parallel()
	f := newFront(t, "test")
	if status, _ := send(t, http.MethodPut, f.url+"/b/k", strings.NewReader("abc"), 3, "Authorization", "AWS4-HMAC-SHA256 Credential=…"); status != 200 || f.reached.Load() != 1 {
		t.Errorf("header-signed request: %d, reached %d", status, f.reached.Load())
	}
}
