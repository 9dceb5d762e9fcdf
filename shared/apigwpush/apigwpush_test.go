package apigwpush_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/remote-agents/remote-agents/shared/apigwpush"
	"github.com/remote-agents/remote-agents/shared/session"
)

// The real SDK against a server speaking the Management API's wire protocol
// (the dev server's @connections is tested in localstack/systemtest): a
// signed POST of the frame to /{stage}/@connections/{id}; 410 GoneException
// is session.ErrGone, any other failure an error that is not.
func TestPush(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") || !strings.Contains(r.Header.Get("Authorization"), "/execute-api/aws4_request") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		switch r.URL.EscapedPath() {
		case "/push/@connections/open%3D":
			mu.Lock()
			got[r.Method] = string(body)
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
		case "/push/@connections/busy%3D":
			w.Header().Set("x-amzn-ErrorType", "LimitExceededException")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"message":"slow down"}`)
		default:
			w.Header().Set("x-amzn-ErrorType", "GoneException")
			w.WriteHeader(http.StatusGone)
			_, _ = io.WriteString(w, `{"message":"gone"}`)
		}
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), RetryMaxAttempts: 1}
	n := apigwpush.New(apigwpush.NewClient(cfg, srv.URL+"/push"))

	if err := n.Push(t.Context(), "open=", []byte(`{"type":"inbox"}`)); err != nil {
		t.Fatal(err)
	}
	if got[http.MethodPost] != `{"type":"inbox"}` {
		t.Errorf("posted %v", got)
	}
	if err := n.Push(t.Context(), "closed=", []byte(`{}`)); !errors.Is(err, session.ErrGone) {
		t.Errorf("gone: %v, want ErrGone", err)
	}
	if err := n.Push(t.Context(), "busy=", []byte(`{}`)); err == nil || errors.Is(err, session.ErrGone) {
		t.Errorf("throttled: %v, want an error that is not ErrGone", err)
	}
}
