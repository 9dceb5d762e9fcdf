package devserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/awserr"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/httpapi"
)

// The dependencies /healthz checks, by the names it reports them under.
const (
	DependencyDynamoDB = "dynamodb"
	DependencySQS      = "sqs"
	DependencyS3       = "s3"
)

// healthTimeout bounds one check: a dependency that does not answer within it
// is unavailable.
const healthTimeout = 5 * time.Second

// Health is the body of GET /healthz: ok, and each dependency's state. When one
// fails the answer is 503 with the error envelope's fields beside these, its
// message naming what fails.
type Health struct {
	OK           bool                  `json:"ok"`
	Dependencies map[string]Dependency `json:"dependencies"`
	// Failing names the dependencies that failed, in order.
	Failing []string `json:"failing,omitempty"`
	*httpapi.Envelope
}

// Dependency is one dependency's state: ok, or what is wrong ("unavailable"
// when it cannot be reached or cannot serve now, "failing" otherwise).
type Dependency struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// health checks what the functions depend on, with the AWS clients of the
// bootstrap: the sessions table, the jobs queue and the bucket.
type health struct {
	clients  bootstrap.Clients
	table    string
	queueURL string
	bucket   string
	log      *slog.Logger
}

func (h *health) checks() map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		DependencyDynamoDB: func(ctx context.Context) error {
			_, err := h.clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &h.table})
			return err
		},
		DependencySQS: func(ctx context.Context) error {
			_, err := h.clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: &h.queueURL, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
			return err
		},
		DependencyS3: func(ctx context.Context) error {
			_, err := h.clients.S3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &h.bucket})
			return err
		},
	}
}

// check runs every check at once.
func (h *health) check(ctx context.Context) Health {
	out := Health{OK: true, Dependencies: map[string]Dependency{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, check := range h.checks() {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, healthTimeout)
			defer cancel()
			dep := Dependency{OK: true}
			if err := check(ctx); err != nil {
				dep = Dependency{Error: "failing"}
				if awserr.Unavailable(err) {
					dep.Error = "unavailable"
				}
				h.log.WarnContext(ctx, "devserver: health check", slog.String("dependency", name), slog.String("error", err.Error()))
			}
			mu.Lock()
			defer mu.Unlock()
			out.Dependencies[name] = dep
			if !dep.OK {
				out.OK = false
				out.Failing = append(out.Failing, name)
			}
		})
	}
	wg.Wait()
	if !out.OK {
		slices.Sort(out.Failing)
		env := httpapi.EnvelopeOf(&apierror.Error{
			Code:       apierror.ServiceUnavailable,
			Message:    fmt.Sprintf("Unavailable: %s.", strings.Join(out.Failing, ", ")),
			RetryAfter: apierror.UnavailableRetryAfter,
		})
		out.Envelope = &env
	}
	return out
}

// ServeHTTP answers GET /healthz: 200 when every dependency answers, else 503
// naming those that do not.
func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	report := h.check(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	status := http.StatusOK
	if !report.OK {
		status = report.Status
		w.Header().Set("Retry-After", fmt.Sprint(report.RetryAfterSeconds))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(report)
}
