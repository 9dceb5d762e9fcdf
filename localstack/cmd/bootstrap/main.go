// Command bootstrap creates the AWS resources of one environment, idempotently,
// wherever the standard AWS variables point: LocalStack (its init hook runs this),
// the bundled emulators, or an account of your own. With -guardrails it also
// uploads the guardrails document to where the functions read it
// (RA_GUARDRAILS_PATH, by default the environment's bucket at
// platform/platform-guardrails.md), and with -seed it loads the development
// fixtures and app key, as the dev server does (package seed), so that a
// create answers there as on `make dev`. A second run changes nothing.
//
//	bootstrap [-env dev] [-guardrails data/platform-guardrails.md] [-seed] [-app-key ra_dev_app_key]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/remote-agents/remote-agents/localstack/seed"
	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/resources"
)

type options struct {
	env, guardrails, appKey string
	seed                    bool
}

func main() {
	var o options
	flag.StringVar(&o.env, "env", envOr("RA_ENV", "dev"), "environment name; prefixes every resource (ra-<env>-…)")
	flag.StringVar(&o.guardrails, "guardrails", "", "upload this guardrails document to RA_GUARDRAILS_PATH (default: the environment's bucket, "+access.GuardrailsKey+")")
	flag.BoolVar(&o.seed, "seed", false, "load the development fixtures (localstack/seed) and register the app key")
	flag.StringVar(&o.appKey, "app-key", envOr("RA_DEV_APP_KEY", seed.DefaultAppKey), "the development app key -seed registers (tenant "+seed.DevTenant+")")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bootstrap:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	set, err := resources.For(o.env)
	if err != nil {
		return err
	}
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return err
	}
	clients := bootstrap.ClientsFor(cfg)
	report, err := bootstrap.Run(ctx, clients, set)
	if err != nil {
		return err
	}
	if o.guardrails != "" {
		what, created, err := uploadGuardrails(ctx, awsconfig.NewS3(cfg), set, o.guardrails)
		if err != nil {
			return err
		}
		if created {
			report.Created = append(report.Created, what)
		} else {
			report.Existing = append(report.Existing, what)
		}
	}
	for _, what := range report.Created {
		fmt.Println("created", what)
	}
	for _, what := range report.Existing {
		fmt.Println("exists ", what)
	}
	fmt.Printf("environment %s: %d created, %d already there\n", o.env, len(report.Created), len(report.Existing))
	if o.seed {
		r, err := seed.Load(ctx, dynamo.NewRegistry(awsconfig.NewDynamoDB(cfg), set.Registry.Name), seed.Fixtures, o.appKey)
		if err != nil {
			return err
		}
		fmt.Printf("seeded %s: %d projects, %d personas, %d agent types, %d configurations, app key %v (tenant %s)\n",
			set.Registry.Name, r.Projects, r.Personas, r.AgentTypes, r.Configurations, r.AppKey, seed.DevTenant)
	}
	return nil
}

// objectAPI is the part of the S3 client the upload calls.
type objectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// uploadGuardrails puts the document at path where RA_GUARDRAILS_PATH points
// (an s3:// URI; by default the environment's bucket, access.GuardrailsKey),
// unless the object there already holds it.
func uploadGuardrails(ctx context.Context, api objectAPI, set resources.Set, path string) (what string, created bool, err error) {
	uri := envOr("RA_GUARDRAILS_PATH", "s3://"+set.Bucket.Name+"/"+access.GuardrailsKey)
	bucket, key, ok := guardrails.ParseS3URI(uri)
	if !ok {
		return "", false, fmt.Errorf("RA_GUARDRAILS_PATH %q is not an s3:// URI to upload the guardrails to", uri)
	}
	what = "guardrails " + uri
	body, err := readBounded(path, guardrails.MaxBytes)
	if err != nil {
		return "", false, fmt.Errorf("guardrails: %w", err)
	}
	out, err := api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var missing *s3types.NoSuchKey
	switch {
	case err == nil:
		current, rerr := io.ReadAll(io.LimitReader(out.Body, guardrails.MaxBytes+1))
		_ = out.Body.Close()
		if rerr == nil && bytes.Equal(current, body) {
			return what, false, nil
		}
	case !errors.As(err, &missing):
		return "", false, fmt.Errorf("read %s: %w", uri, err)
	}
	if _, err := api.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("text/markdown; charset=utf-8"),
	}); err != nil {
		return "", false, fmt.Errorf("upload %s: %w", uri, err)
	}
	return what, true, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
