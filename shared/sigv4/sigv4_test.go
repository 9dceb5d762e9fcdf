package sigv4_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/remote-agents/remote-agents/shared/sigv4"
)

var (
	now   = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	creds = aws.Credentials{AccessKeyID: "AKIDORCHESTRATOR", SecretAccessKey: "orchestrator-secret"}
)

func verifier() *sigv4.Verifier {
	return &sigv4.Verifier{Region: "us-east-1", Service: "execute-api", Keys: []sigv4.Credentials{{KeyID: creds.AccessKeyID, Secret: creds.SecretAccessKey}},
		Now: func() time.Time { return now }}
}

// sign signs a request with the SDK's signer and returns what a server sees.
func sign(t *testing.T, method, target string, body []byte, c aws.Credentials, region string, at time.Time) sigv4.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Identity-Id", "  a   b ")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), c, req, hex.EncodeToString(sum[:]), "execute-api", region, at); err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"host": req.URL.Host}
	for k, v := range req.Header {
		h[strings.ToLower(k)] = strings.Join(v, ",")
	}
	return sigv4.Request{Method: method, Path: req.URL.EscapedPath(), RawQuery: req.URL.RawQuery, Headers: h, Body: body}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"a":1}`)
	const target = "http://127.0.0.1:8080/internal/jobs/abc%20d/logs?after=3&z=1&a=b%2Fc"
	tests := []struct {
		name   string
		req    func() sigv4.Request
		target error
	}{
		{"valid", func() sigv4.Request { return sign(t, "POST", target, body, creds, "us-east-1", now) }, nil},
		{"valid at the edge of the skew", func() sigv4.Request { return sign(t, "GET", target, nil, creds, "us-east-1", now.Add(-4*time.Minute)) }, nil},
		{"unsigned", func() sigv4.Request {
			r := sign(t, "POST", target, body, creds, "us-east-1", now)
			delete(r.Headers, "authorization")
			return r
		}, sigv4.ErrUnsigned},
		{"wrong secret", func() sigv4.Request {
			return sign(t, "POST", target, body, aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: "nope"}, "us-east-1", now)
		}, sigv4.ErrSignature},
		{"unknown key", func() sigv4.Request {
			return sign(t, "POST", target, body, aws.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: "x"}, "us-east-1", now)
		}, sigv4.ErrUnknownKey},
		{"other region", func() sigv4.Request { return sign(t, "POST", target, body, creds, "eu-west-1", now) }, sigv4.ErrScope},
		{"expired", func() sigv4.Request {
			return sign(t, "POST", target, body, creds, "us-east-1", now.Add(-6*time.Minute))
		}, sigv4.ErrExpired},
		{"from the future", func() sigv4.Request { return sign(t, "POST", target, body, creds, "us-east-1", now.Add(6*time.Minute)) }, sigv4.ErrExpired},
		{"body tampered", func() sigv4.Request {
			r := sign(t, "POST", target, body, creds, "us-east-1", now)
			r.Body = []byte(`{"a":2}`)
			return r
		}, sigv4.ErrSignature},
		{"signed header changed", func() sigv4.Request {
			r := sign(t, "POST", target, body, creds, "us-east-1", now)
			r.Headers["x-identity-id"] = "c"
			return r
		}, sigv4.ErrSignature},
		{"path changed", func() sigv4.Request {
			r := sign(t, "POST", target, body, creds, "us-east-1", now)
			r.Path = "/internal/jobs/other/logs"
			return r
		}, sigv4.ErrSignature},
		{"query changed", func() sigv4.Request {
			r := sign(t, "POST", target, body, creds, "us-east-1", now)
			r.RawQuery = "after=4"
			return r
		}, sigv4.ErrSignature},
		{"method changed", func() sigv4.Request {
			r := sign(t, "POST", target, body, creds, "us-east-1", now)
			r.Method = "PUT"
			return r
		}, sigv4.ErrSignature},
		{"garbage", func() sigv4.Request {
			r := sign(t, "POST", target, body, creds, "us-east-1", now)
			r.Headers["authorization"] = "AWS4-HMAC-SHA256 Credential=x"
			return r
		}, sigv4.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := verifier().Verify(tt.req())
			if tt.target == nil {
				if err != nil || id != creds.AccessKeyID {
					t.Fatalf("Verify = %q, %v; want the key id", id, err)
				}
				return
			}
			if !errors.Is(err, tt.target) {
				t.Fatalf("Verify error = %v, want %v", err, tt.target)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20261126/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=00", "20261126T120000Z", "/x", "a=b")
	f.Fuzz(func(t *testing.T, auth, date, path, query string) {
		_, err := verifier().Verify(sigv4.Request{Method: "GET", Path: path, RawQuery: query, Headers: map[string]string{"authorization": auth, "x-amz-date": date, "host": "h"}})
		if err == nil {
			t.Fatal("a request not signed by a known key verified")
		}
	})
}

// Unsigned names the headers a request has that its signature leaves out.
func TestUnsigned(t *testing.T) {
	auth := "AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date;x-b, Signature=" + strings.Repeat("0f", 32)
	present := map[string]bool{"x-a": true, "x-b": true}
	has := func(n string) bool { return present[n] }
	if got := sigv4.Unsigned(auth, []string{"x-a", "x-b", "x-c"}, has); !slices.Equal(got, []string{"x-a"}) {
		t.Errorf("Unsigned = %v, want [x-a]", got)
	}
	if got := sigv4.Unsigned("Bearer x", []string{"x-a", "x-b", "x-c"}, has); !slices.Equal(got, []string{"x-a", "x-b"}) {
		t.Errorf("Unsigned(no signature) = %v, want [x-a x-b]", got)
	}
}
