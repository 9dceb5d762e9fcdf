// Package awsconfig builds the AWS SDK configuration and service clients, in one place,
// for every process of the system: Lambda functions, the sandbox tools, the dev server,
// the bootstrap and the tests.
//
// Endpoints follow the SDK's standard environment variables: AWS_ENDPOINT_URL for
// every service, or AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL_EVENTBRIDGE for one (the
// per-service variable wins). When an endpoint is
// overridden (LocalStack, the bundled emulators) S3 uses path-style addressing, and a
// process without credentials gets fixed local ones so it can sign requests.
package awsconfig

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Service identifies an AWS service by the suffix of its endpoint variable.
type Service string

// The services the system talks to.
const (
	DynamoDB Service = "DYNAMODB"
	SQS      Service = "SQS"
	S3       Service = "S3"
	// EventBridge is reached on AWS and LocalStack only: the bundled emulators
	// have none (AWS_ENDPOINT_URL_EVENTBRIDGE, else AWS_ENDPOINT_URL).
	EventBridge Service = "EVENTBRIDGE"
)

// DefaultRegion is used when neither AWS_REGION nor AWS_DEFAULT_REGION is set.
const DefaultRegion = "us-east-1"

// Retry and transport limits. Calls that wait on purpose (SQS long polling) carry
// their own context deadline, so there is no overall client timeout. The SDK's
// AWS_MAX_ATTEMPTS, if set, replaces maxAttempts (1: no retries, as tests of
// outages want).
const (
	maxAttempts      = 5
	maxBackoff       = 2 * time.Second
	dialTimeout      = 3 * time.Second
	tlsTimeout       = 5 * time.Second
	idleConnsPerHost = 64
)

// Endpoint returns the endpoint override for service from the environment, or "".
func Endpoint(service Service) string {
	if v := os.Getenv("AWS_ENDPOINT_URL_" + string(service)); v != "" {
		return v
	}
	return os.Getenv("AWS_ENDPOINT_URL")
}

// Overridden reports whether any service endpoint is overridden, i.e. the process
// talks to LocalStack or the bundled emulators rather than AWS.
func Overridden() bool {
	for _, s := range []Service{DynamoDB, SQS, S3} {
		if Endpoint(s) != "" {
			return true
		}
	}
	return false
}

// Load builds a fresh aws.Config from the environment. Most callers want Default.
func Load(ctx context.Context) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient()),
		config.WithLogger(newSDKLogger(os.Stderr)),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts()
				o.MaxBackoff = maxBackoff
			})
		}),
	}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion(DefaultRegion))
	}
	if Overridden() && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		// Local endpoints accept any signature; never used against AWS itself.
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	return cfg, nil
}

// attempts is how many times a call is tried: AWS_MAX_ATTEMPTS if it is a
// positive number (the SDK refuses one that is not a number), else maxAttempts.
func attempts() int {
	if n, err := strconv.Atoi(os.Getenv("AWS_MAX_ATTEMPTS")); err == nil && n > 0 {
		return n
	}
	return maxAttempts
}

// Default returns the process-wide aws.Config, built on first use.
var Default = sync.OnceValues(func() (aws.Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Load(ctx)
})

// httpClient is buildable, so the SDK can still apply AWS_CA_BUNDLE to it.
func httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = dialTimeout
			d.KeepAlive = 30 * time.Second
		}).
		WithTransportOptions(func(t *http.Transport) {
			t.TLSHandshakeTimeout = tlsTimeout
			t.MaxIdleConns = 256
			t.MaxIdleConnsPerHost = idleConnsPerHost
			t.IdleConnTimeout = 90 * time.Second
		})
}

// NewDynamoDB returns a DynamoDB client for cfg.
func NewDynamoDB(cfg aws.Config) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg)
}

// NewSQS returns an SQS client for cfg.
func NewSQS(cfg aws.Config) *sqs.Client {
	return sqs.NewFromConfig(cfg)
}

// NewS3 returns an S3 client for cfg, path-style when the S3 endpoint is overridden.
func NewS3(cfg aws.Config) *s3.Client {
	pathStyle := Endpoint(S3) != ""
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = pathStyle
	})
}
