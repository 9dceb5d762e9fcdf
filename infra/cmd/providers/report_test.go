package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// secretsServer speaks Secrets Manager's JSON protocol for the secrets it
// holds: name → value ("" for a secret with no value). It records every
// operation it is asked for.
type secretsServer struct {
	secrets map[string]string
	denied  string // a secret whose description is refused

	mu  sync.Mutex
	ops []string
}

func (f *secretsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager.")
	f.mu.Lock()
	f.ops = append(f.ops, op)
	f.mu.Unlock()
	var in struct{ SecretId string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	fail := func(typ, msg string) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "Message": msg})
	}
	value, ok := f.secrets[in.SecretId]
	switch {
	case in.SecretId == f.denied:
		fail("AccessDeniedException", "not authorized to perform secretsmanager:DescribeSecret")
	case !ok:
		fail("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	case op == "GetSecretValue":
		_ = json.NewEncoder(w).Encode(map[string]any{"Name": in.SecretId, "SecretString": value})
	case op == "DescribeSecret":
		out := map[string]any{"Name": in.SecretId, "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + in.SecretId + "-AbCdEf"}
		if value != "" {
			out["VersionIdsToStages"] = map[string][]string{"3f1c": {"AWSCURRENT"}, "0a9b": {"AWSPREVIOUS"}}
		}
		_ = json.NewEncoder(w).Encode(out)
	default:
		fail("InvalidRequestException", "unexpected "+op)
	}
}

// spaced is s with each run of spaces one space, as the report's columns
// are aligned to their widest cell.
func spaced(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }

func client(t *testing.T, f *secretsServer) *secretsmanager.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return secretsmanager.New(secretsmanager.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}})
}

// The report says, per provider, whether its secret holds a key, how to put
// one in, or that the stack is not deployed; it asks Secrets Manager only for
// descriptions (no value is ever read), prints no value, and warns when the
// sandboxes' default provider has no key.
func TestReportSaysWhichProvidersHaveAKey(t *testing.T) {
	f := &secretsServer{secrets: map[string]string{
		"ra-dev-model-anthropic": "sk-ant-not-to-be-printed",
		"ra-dev-model-openai":    "",
		"ra-dev-model-mistral":   "mistral-not-to-be-printed",
	}}
	var out bytes.Buffer
	outputs := map[string]string{"SandboxLlmProvider": "openai", "SandboxLlmModel": "gpt-5", "BedrockModels": "us.anthropic.claude-sonnet-4-5-20250929-v1:0,amazon.nova-pro-v1:0"}
	if err := report(context.Background(), &out, client(t, f), "dev", outputs); err != nil {
		t.Fatal(err)
	}
	got := spaced(out.String())
	for _, want := range []string{
		"anthropic set ra-dev-model-anthropic\n",
		`openai empty no key: aws secretsmanager put-secret-value --secret-id ra-dev-model-openai --secret-string "$OPENAI_API_KEY"`,
		"gemini missing ra-dev-model-gemini does not exist: deploy the stack first (make deploy ENV=dev)",
		"mistral set ra-dev-model-mistral\n",
		"bedrock role the model function may invoke us.anthropic.claude-sonnet-4-5-20250929-v1:0, amazon.nova-pro-v1:0",
		"Sandboxes default to openai gpt-5.\n",
		"Warning: openai has no key",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	for _, value := range f.secrets {
		if value != "" && strings.Contains(got, value) {
			t.Errorf("the report shows a key:\n%s", got)
		}
	}
	if slices.ContainsFunc(f.ops, func(op string) bool { return op != "DescribeSecret" }) || len(f.ops) != 4 {
		t.Errorf("operations %v, want DescribeSecret of each provider only", f.ops)
	}
}

func TestReportWithoutOutputsAndWithAKeyedDefault(t *testing.T) {
	f := &secretsServer{secrets: map[string]string{"ra-prod-model-anthropic": "k", "ra-prod-model-openai": "", "ra-prod-model-gemini": "", "ra-prod-model-mistral": ""}}
	var out bytes.Buffer
	if err := report(context.Background(), &out, client(t, f), "prod", nil); err != nil {
		t.Fatal(err)
	}
	if got := spaced(out.String()); strings.Contains(got, "bedrock") || strings.Contains(got, "default") || !strings.Contains(got, "anthropic set") {
		t.Errorf("report without outputs:\n%s", got)
	}
	out.Reset()
	if err := report(context.Background(), &out, client(t, f), "prod", map[string]string{"SandboxLlmProvider": "anthropic", "SandboxLlmModel": "claude-opus-4.5"}); err != nil {
		t.Fatal(err)
	}
	if got := spaced(out.String()); strings.Contains(got, "Warning") || !strings.Contains(got, "bedrock none no Bedrock model granted") {
		t.Errorf("report with a keyed default and no Bedrock model:\n%s", got)
	}
}

// A secret the caller may not describe fails the report, naming it.
func TestReportFailsOnADeniedSecret(t *testing.T) {
	f := &secretsServer{secrets: map[string]string{"ra-dev-model-anthropic": "k"}, denied: "ra-dev-model-anthropic"}
	err := report(context.Background(), &bytes.Buffer{}, client(t, f), "dev", nil)
	if err == nil || !strings.Contains(err.Error(), "describe secret ra-dev-model-anthropic") || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("error %v", err)
	}
}

func TestReadOutputs(t *testing.T) {
	dir := t.TempDir()
	if out, err := readOutputs(filepath.Join(dir, "absent.json"), "RemoteAgents-dev"); out != nil || err != nil {
		t.Errorf("absent file: %v, %v", out, err)
	}
	out, err := parseOutputs(strings.NewReader(`{"RemoteAgents-dev":{"SandboxLlmProvider":"bedrock","PublicUrl":"https://d.cloudfront.net"}}`), "RemoteAgents-dev")
	if err != nil || out["SandboxLlmProvider"] != "bedrock" {
		t.Errorf("outputs %v, %v", out, err)
	}
	if _, err := parseOutputs(strings.NewReader(`{`), "RemoteAgents-dev"); err == nil {
		t.Error("a broken file read without error")
	}
}
