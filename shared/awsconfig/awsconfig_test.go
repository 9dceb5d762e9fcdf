package awsconfig_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
)

// recorder is an HTTP server that remembers the host and path of each request.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Host+req.URL.Path)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"TableNames":[]}`))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func TestPerServiceEndpointWinsOverGeneral(t *testing.T) {
	general, dynamo := newRecorder(t), newRecorder(t)
	t.Setenv("AWS_ENDPOINT_URL", general.URL)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamo.URL)
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "")

	if got := awsconfig.Endpoint(awsconfig.DynamoDB); got != dynamo.URL {
		t.Errorf("Endpoint(DynamoDB) = %q, want %q", got, dynamo.URL)
	}
	if got := awsconfig.Endpoint(awsconfig.SQS); got != general.URL {
		t.Errorf("Endpoint(SQS) = %q, want the general %q", got, general.URL)
	}
	cfg, err := awsconfig.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || creds.AccessKeyID == "" {
		t.Errorf("no local credentials with an overridden endpoint: %+v, %v", creds, err)
	}
	if _, err := awsconfig.NewDynamoDB(cfg).ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if len(dynamo.requests()) != 1 || len(general.requests()) != 0 {
		t.Errorf("DynamoDB went to per-service %v and general %v; want exactly one per-service", dynamo.requests(), general.requests())
	}
}

func TestS3IsPathStyleWhenOverridden(t *testing.T) {
	srv := newRecorder(t)
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	cfg, err := awsconfig.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bucket := "ra-dev-data"
	_, _ = awsconfig.NewS3(cfg).HeadBucket(t.Context(), &s3.HeadBucketInput{Bucket: &bucket})
	reqs := srv.requests()
	if len(reqs) == 0 || !strings.HasSuffix(reqs[0], "/"+bucket) || strings.HasPrefix(reqs[0], bucket+".") {
		t.Errorf("S3 requests %v: want path-style /%s", reqs, bucket)
	}
}

func TestDefaultRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	cfg, err := awsconfig.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != awsconfig.DefaultRegion {
		t.Errorf("region = %q, want %q", cfg.Region, awsconfig.DefaultRegion)
	}
}

// AWS_MAX_ATTEMPTS is how often a failing call is tried, as the SDK documents.
func TestMaxAttemptsFromEnvironment(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want int
	}{{"1", 1}, {"2", 2}, {"", 5}} {
		t.Setenv("AWS_MAX_ATTEMPTS", tt.env)
		cfg, err := awsconfig.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Retryer().MaxAttempts(); got != tt.want {
			t.Errorf("AWS_MAX_ATTEMPTS=%q: %d attempts, want %d", tt.env, got, tt.want)
		}
	}
}
