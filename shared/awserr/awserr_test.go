package awserr_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/awserr"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
)

// reply is what a local server speaking a service's wire format answers.
type reply struct {
	status  int
	headers map[string]string
	body    string
}

// serve answers every request with r.
func serve(t *testing.T, r reply) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range r.headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(r.status)
		_, _ = w.Write([]byte(r.body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// closedPort is the URL of a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return url
}

// cfg is a client configuration for endpoint that tries once: the outage is
// the server's answer, not the retries'.
func cfg(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
		Retryer:      func() aws.Retryer { return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 1 }) },
	}
}

func ddbError(status int, typ string, extra string) reply {
	return reply{status: status, headers: map[string]string{"Content-Type": "application/x-amz-json-1.0"},
		body: `{"__type":"com.amazonaws.dynamodb.v20120810#` + typ + `","message":"from the test server"` + extra + `}`}
}

// getItem reads one item from a table at endpoint through the adapter.
func getItem(ctx context.Context, endpoint string) error {
	var out map[string]any
	return dynamo.NewTable(dynamodb.NewFromConfig(cfg(endpoint)), "t").Get(ctx, map[string]string{"id": "x"}, &out)
}

// The adapters turn what the SDK reports for an outage into service_unavailable,
// whatever the service, and leave the caller's own mistakes alone.
func TestAdaptersClassifyOutages(t *testing.T) {
	t.Parallel()
	past, cancel := context.WithDeadline(t.Context(), time.Unix(1, 0))
	defer cancel()
	gone, stop := context.WithCancel(t.Context())
	stop()
	tests := []struct {
		name        string
		call        func() error
		unavailable bool
	}{
		{"dynamodb: connection refused", func() error { return getItem(t.Context(), closedPort(t)) }, true},
		{"dynamodb: 500 InternalServerError", func() error { return getItem(t.Context(), serve(t, ddbError(500, "InternalServerError", ""))) }, true},
		{"dynamodb: 503 without a body", func() error { return getItem(t.Context(), serve(t, reply{status: 503})) }, true},
		{"dynamodb: throttled", func() error { return getItem(t.Context(), serve(t, ddbError(400, "ThrottlingException", ""))) }, true},
		{"dynamodb: over provisioned throughput", func() error {
			return getItem(t.Context(), serve(t, ddbError(400, "ProvisionedThroughputExceededException", "")))
		}, true},
		{"dynamodb: deadline passed", func() error { return getItem(past, serve(t, reply{status: 200, body: "{}"})) }, true},
		{"dynamodb: no such table", func() error { return getItem(t.Context(), serve(t, ddbError(400, "ResourceNotFoundException", ""))) }, false},
		{"dynamodb: invalid request", func() error { return getItem(t.Context(), serve(t, ddbError(400, "ValidationException", ""))) }, false},
		{"dynamodb: caller went away", func() error { return getItem(gone, serve(t, reply{status: 200, body: "{}"})) }, false},
		{"dynamodb: condition failed", func() error {
			tbl := dynamo.NewTable(dynamodb.NewFromConfig(cfg(serve(t, ddbError(400, "ConditionalCheckFailedException", "")))), "t")
			return tbl.Put(t.Context(), map[string]string{"id": "x"}, expression.AttributeNotExists(expression.Name("id")))
		}, false},
		{"dynamodb: transaction throttled", func() error {
			return transact(t, `,"CancellationReasons":[{"Code":"None"},{"Code":"ThrottlingError"}]`)
		}, true},
		{"dynamodb: transaction condition failed", func() error {
			return transact(t, `,"CancellationReasons":[{"Code":"ConditionalCheckFailed"},{"Code":"None"}]`)
		}, false},
		{"sqs: connection refused", func() error {
			_, err := sqsqueue.New(sqs.NewFromConfig(cfg(closedPort(t))), "http://queue.local/q").Send(t.Context(), "m", 0)
			return err
		}, true},
		{"sqs: throttled", func() error {
			url := serve(t, reply{status: 400, headers: map[string]string{"Content-Type": "application/x-amz-json-1.0", "x-amzn-query-error": "RequestThrottled;Sender"},
				body: `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"slow down"}`})
			_, err := sqsqueue.New(sqs.NewFromConfig(cfg(url)), "http://queue.local/q").Send(t.Context(), "m", 0)
			return err
		}, true},
		{"sqs: no such queue", func() error {
			url := serve(t, reply{status: 400, headers: map[string]string{"Content-Type": "application/x-amz-json-1.0", "x-amzn-query-error": "AWS.SimpleQueueService.NonExistentQueue;Sender"},
				body: `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no queue"}`})
			_, err := sqsqueue.New(sqs.NewFromConfig(cfg(url)), "http://queue.local/q").Send(t.Context(), "m", 0)
			return err
		}, false},
		{"s3: slow down", func() error {
			url := serve(t, reply{status: 503, headers: map[string]string{"Content-Type": "application/xml"},
				body: `<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>`})
			return s3Get(t, url)
		}, true},
		{"s3: connection refused", func() error { return s3Get(t, closedPort(t)) }, true},
		{"s3: access denied", func() error {
			url := serve(t, reply{status: 403, headers: map[string]string{"Content-Type": "application/xml"},
				body: `<Error><Code>AccessDenied</Code><Message>no</Message></Error>`})
			return s3Get(t, url)
		}, false},
	}
	for _, tt := range tests {
		err := tt.call()
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		env := httpapi.EnvelopeOf(err)
		got := env.ErrorCode == apierror.ServiceUnavailable
		if got != tt.unavailable || awserr.Unavailable(err) != tt.unavailable {
			t.Errorf("%s: %v shown as %+v, want unavailable %v", tt.name, err, env, tt.unavailable)
			continue
		}
		if got && (env.Status != 503 || !env.Retryable || env.RetryAfterSeconds <= 0 || strings.Contains(env.Message, "test server") || strings.Contains(env.Message, "127.0.0.1")) {
			t.Errorf("%s: envelope %+v", tt.name, env)
		}
	}
}

func transact(t *testing.T, reasons string) error {
	t.Helper()
	url := serve(t, ddbError(400, "TransactionCanceledException", reasons))
	api := dynamodb.NewFromConfig(cfg(url))
	a, b := dynamo.NewTable(api, "a"), dynamo.NewTable(api, "b")
	return dynamo.Transact(t.Context(), api, "", a.PutOp(map[string]string{"id": "1"}), b.PutOp(map[string]string{"id": "2"}))
}

func s3Get(t *testing.T, endpoint string) error {
	t.Helper()
	client := s3.NewFromConfig(cfg(endpoint), func(o *s3.Options) { o.UsePathStyle = true })
	_, _, err := s3blob.New(client, "bucket").Get(t.Context(), "some/key")
	return err
}

// Errors that are not the SDK's pass through unchanged.
func TestClassifyLeavesOtherErrors(t *testing.T) {
	t.Parallel()
	plain := errors.New("marshal item: bad")
	if got := awserr.Classify(plain); !errors.Is(got, plain) || apierror.CodeOf(got) != "" {
		t.Errorf("Classify(%v) = %v", plain, got)
	}
	if awserr.Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
}
