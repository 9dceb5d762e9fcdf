package main_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/localstack/seed"
	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/token"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// The LocalStack init hook, run as LocalStack would run it but against the local
// AWS of the tests, creates everything once (the guardrails document where
// the functions read it, the seed data and the app key with it) and nothing
// the second time.
func TestInitHookRunsTheBootstrapIdempotently(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "bootstrap")
	// As make builds dist/localstack/bootstrap (no cgo, -trimpath).
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := awstest.UniqueEnv(t)
	appKey := "ra_key_" + env
	guardrailsFile := filepath.Join("..", "..", "..", "data", "platform-guardrails.md")
	hook := filepath.Join("..", "..", "init", "ready.d", "10-bootstrap.sh")
	runHook := func() string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "bash", hook)
		cmd.Env = append(os.Environ(), "RA_BOOTSTRAP_BIN="+bin, "RA_ENV="+env, "RA_GUARDRAILS_FILE="+guardrailsFile, "RA_DEV_APP_KEY="+appKey)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hook: %v\n%s", err, out)
		}
		return string(out)
	}
	seeded := "seeded ra-" + env + "-registry: 1 projects, 2 personas, 1 agent types, 1 configurations, app key true (tenant dev)"
	// On LocalStack, the jobs' bus and its rule too.
	n := 21 // 5 tables, their TTLs, the events table's stream, 8 queues, the bucket, the guardrails
	if awsconfig.Endpoint(awsconfig.EventBridge) != "" {
		n += 2
	}
	if out := runHook(); !strings.Contains(out, fmt.Sprintf("environment %s: %d created, 0 already there", env, n)) || !strings.Contains(out, seeded) {
		t.Errorf("first run:\n%s", out)
	}
	if out := runHook(); !strings.Contains(out, fmt.Sprintf("environment %s: 0 created, %d already there", env, n)) || !strings.Contains(out, seeded) {
		t.Errorf("second run:\n%s", out)
	}

	set, err := resources.For(env)
	if err != nil {
		t.Fatal(err)
	}
	cfg := awstest.Config(t)
	obj, err := awsconfig.NewS3(cfg).GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(set.Bucket.Name), Key: aws.String(access.GuardrailsKey)})
	if err != nil {
		t.Fatalf("guardrails object: %v", err)
	}
	got, err := io.ReadAll(obj.Body)
	_ = obj.Body.Close()
	want, rerr := os.ReadFile(guardrailsFile)
	if err != nil || rerr != nil || !bytes.Equal(got, want) {
		t.Errorf("s3://%s/%s holds %d bytes (%v %v), want data/platform-guardrails.md's %d", set.Bucket.Name, access.GuardrailsKey, len(got), err, rerr, len(want))
	}
	// What a create needs, as the functions read it.
	reg := dynamo.NewRegistry(awsconfig.NewDynamoDB(cfg), set.Registry.Name)
	if _, err := reg.Project(t.Context(), seed.DevTenant, "demo"); err != nil {
		t.Errorf("project demo: %v", err)
	}
	if _, err := reg.Persona(t.Context(), seed.DevTenant, "assistant"); err != nil {
		t.Errorf("persona assistant: %v", err)
	}
	if at, err := reg.AgentType(t.Context(), seed.DevTenant, "default"); err != nil || !at.Workspace.Enabled {
		t.Errorf("agent type default: %+v %v", at, err)
	}
	if _, err := reg.Configuration(t.Context(), seed.DevTenant, "demo-web"); err != nil {
		t.Errorf("configuration demo-web: %v", err)
	}
	if k, err := reg.AppKeyByHash(t.Context(), token.Hash(appKey)); err != nil || k.Tenant != seed.DevTenant {
		t.Errorf("app key: %+v %v", k, err)
	}
	src := guardrails.Object{Store: s3blob.New(awsconfig.NewS3(cfg), set.Bucket.Name), URI: "s3://" + set.Bucket.Name + "/" + access.GuardrailsKey, Key: access.GuardrailsKey}
	text, err := guardrails.Load(t.Context(), src)
	if err != nil || text.Hash == "" {
		t.Errorf("the functions' guardrails source: %+v %v", text, err)
	}
}

// The compose file mounts the hook, the binary and the guardrails where the
// hook looks for them, and turns on every service the hook, the functions and
// the LocalStack stack variant use (LocalStack serves only SERVICES), and the
// Docker socket LocalStack runs Lambda functions through.
func TestComposeMountsWhatTheHookUses(t *testing.T) {
	t.Parallel()
	compose, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	hook, err := os.ReadFile(filepath.Join("..", "..", "init", "ready.d", "10-bootstrap.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"./init/ready.d:/etc/localstack/init/ready.d",
		"../dist/localstack/bootstrap:/opt/remote-agents/bootstrap",
		"../data/platform-guardrails.md:/opt/remote-agents/platform-guardrails.md",
		"/var/run/docker.sock:/var/run/docker.sock",
		"127.0.0.1:4566:4566",
	} {
		if !strings.Contains(string(compose), want) {
			t.Errorf("docker-compose.yml lacks %q", want)
		}
	}
	for _, want := range []string{"/opt/remote-agents/bootstrap", "/opt/remote-agents/platform-guardrails.md", "-seed"} {
		if !strings.Contains(string(hook), want) {
			t.Errorf("the hook does not pass %s", want)
		}
	}
	var services []string
	for _, line := range strings.Split(string(compose), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "SERVICES:"); ok {
			services = strings.Split(strings.TrimSpace(v), ",")
		}
	}
	// The hook's (DynamoDB, SQS, S3), cdklocal's (CloudFormation, its
	// bootstrap stack's IAM, SSM, STS) and the variant's resources'.
	for _, want := range []string{"dynamodb", "sqs", "s3", "cloudformation", "iam", "sts", "ssm", "lambda", "secretsmanager", "events", "logs"} {
		if !slices.Contains(services, want) {
			t.Errorf("SERVICES %v lacks %s", services, want)
		}
	}
}
