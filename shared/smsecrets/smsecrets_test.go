package smsecrets_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/smsecrets"
)

// secretsServer speaks Secrets Manager's JSON protocol (GetSecretValue):
// values by secret id, a missing id is ResourceNotFoundException, and the id
// "down" a 500.
type secretsServer struct {
	mu     sync.Mutex
	values map[string]string
	reads  map[string]int
}

func (s *secretsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct{ SecretId string }
	if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || json.NewDecoder(r.Body).Decode(&in) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reads[in.SecretId]++
	v, ok := s.values[in.SecretId]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch {
	case in.SecretId == "down":
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"__type":"InternalServiceError","message":"try later"}`)
	case !ok:
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`)
	default:
		out := map[string]any{"ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + in.SecretId, "Name": in.SecretId, "VersionId": "v1"}
		if v != "" {
			out["SecretString"] = v
		}
		_ = json.NewEncoder(w).Encode(out)
	}
}

func (s *secretsServer) set(id, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[id] = v
}

func (s *secretsServer) readsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[id]
}

func TestKeys(t *testing.T) {
	t.Parallel()
	srv := &secretsServer{values: map[string]string{"ra-test-anthropic": " sk-ant-platform\n", "ra-test-openai": ""}, reads: map[string]int{}}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	client := secretsmanager.NewFromConfig(aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	})
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	keys := smsecrets.New(client, map[string]string{
		"anthropic": "ra-test-anthropic", "openai": "ra-test-openai", "gemini": "ra-test-gemini", "mistral": "down",
	}).WithClock(func() time.Time { return now })

	// Read once per process, then kept.
	for range 3 {
		if key, err := keys.Key(t.Context(), "anthropic"); err != nil || key != "sk-ant-platform" {
			t.Fatalf("anthropic: %q, %v", key, err)
		}
	}
	if n := srv.readsOf("ra-test-anthropic"); n != 1 {
		t.Errorf("the secret was read %d times, want once", n)
	}
	// An empty secret and a missing one hold no key, and are not read again
	// until RetryEmpty has passed.
	for _, p := range []string{"openai", "gemini", "bedrock"} {
		for range 2 {
			if _, err := keys.Key(t.Context(), p); !errors.Is(err, modelgateway.ErrNoKey) {
				t.Errorf("%s: %v, want ErrNoKey", p, err)
			}
		}
	}
	if srv.readsOf("ra-test-openai") != 1 || srv.readsOf("ra-test-gemini") != 1 {
		t.Errorf("reads %v, want one of each", srv.reads)
	}
	srv.set("ra-test-openai", "sk-openai-platform")
	now = now.Add(smsecrets.RetryEmpty)
	if key, err := keys.Key(t.Context(), "openai"); err != nil || key != "sk-openai-platform" {
		t.Errorf("openai once filled: %q, %v", key, err)
	}
	// An outage is service_unavailable, and is not taken for a missing key.
	if _, err := keys.Key(t.Context(), "mistral"); apierror.CodeOf(err) != apierror.ServiceUnavailable || errors.Is(err, modelgateway.ErrNoKey) {
		t.Errorf("Secrets Manager failing: %v, want service_unavailable", err)
	}
}
