package functionset_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/launch/fargate"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/functionset"
)

// env is an Env whose clients point at an address nothing listens on: building
// a function must not need AWS when the queue URLs are configured.
func env(t *testing.T) *wiring.Env {
	t.Helper()
	cfg := config.PlatformDefaults()
	cfg.GuardrailsPath = "../../../data/platform-guardrails.md"
	cfg.Queues = config.Queues{
		Jobs: "http://127.0.0.1:1/q/jobs", JobsDLQ: "http://127.0.0.1:1/q/jobs-dlq",
		Tools: "http://127.0.0.1:1/q/tools", ToolsDLQ: "http://127.0.0.1:1/q/tools-dlq",
		Webhooks: "http://127.0.0.1:1/q/webhooks", WebhooksDLQ: "http://127.0.0.1:1/q/webhooks-dlq",
	}
	cfg.OrchestratorQueue = "http://127.0.0.1:1/q/orchestrator"
	cfg.OrchestratorRoleARN = config.DevOrchestratorRoleARN
	awsCfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials: aws.AnonymousCredentials{}}
	e, err := wiring.New(cfg, awsCfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e.Launcher, err = fargate.FromConfig(awsCfg, config.Fargate{Cluster: "c", TaskDefinition: "td", Container: "agent", Subnets: []string{"subnet-1"}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEveryFunctionIsBuiltFromTheRouteTable builds each function of the route
// table with its constructor, in an Env of its own: together they serve every
// route exactly once, each the routes the table gives it (with CORS where the
// table says), and each hands
// lambda.Start a handler it accepts.
func TestEveryFunctionIsBuiltFromTheRouteTable(t *testing.T) {
	t.Parallel()
	builders := functionset.Builders()
	if len(builders) != len(routes.Functions()) {
		t.Errorf("%d constructors for %d functions", len(builders), len(routes.Functions()))
	}
	var served []string
	for _, name := range routes.Functions() {
		build, ok := builders[name]
		if !ok {
			t.Errorf("function %s has no constructor", name)
			continue
		}
		f, err := build(t.Context(), env(t))
		if err != nil {
			t.Errorf("build %s: %v", name, err)
			continue
		}
		if f.Name != name {
			t.Errorf("build %s made function %q", name, f.Name)
		}
		for _, r := range f.Routes {
			served = append(served, r.Key())
			if want := functionOf(r.Key()); want != name {
				t.Errorf("%s serves %s, which the route table gives %q", name, r.Key(), want)
			}
			// API Gateway answers the preflights of exactly the table's CORS routes.
			if want := corsOf(r.Key()); r.CORS != want {
				t.Errorf("%s answers CORS preflights: %v, the route table says %v", r.Key(), r.CORS, want)
			}
		}
		if slices.Contains(routes.Workers, name) != (f.Worker != nil) {
			t.Errorf("%s: worker %v", name, f.Worker != nil)
		}
		// lambda.NewHandler refuses a handler of the wrong shape; an empty
		// event reaches this one, which must answer without calling AWS.
		out, err := lambda.NewHandler(f.Handler()).Invoke(context.Background(), []byte(`{}`))
		if err != nil || len(out) == 0 || (!json.Valid(out) && !streams(name)) {
			t.Errorf("%s: invoke with an empty event: %v %s", name, err, out)
		}
	}
	var want []string
	for _, r := range routes.All() {
		want = append(want, r.Key())
	}
	slices.Sort(served)
	slices.Sort(want)
	if !slices.Equal(served, want) {
		t.Errorf("served routes\n%v\nwant\n%v", served, want)
	}
}

// streams reports whether function fn serves a streamed route, whose
// function URL answer is a prelude and a body, not one JSON document.
func streams(fn string) bool {
	for _, r := range routes.All() {
		if r.Function == fn && r.Stream {
			return true
		}
	}
	return false
}

func corsOf(key string) bool {
	for _, r := range routes.All() {
		if r.Key() == key {
			return r.CORS()
		}
	}
	return false
}

func functionOf(key string) string {
	for _, r := range routes.All() {
		if r.Key() == key {
			return r.Function
		}
	}
	return ""
}

// TestQueuesAreNeededOnlyByTheirFunctions: a function that sends to no queue
// builds without finding one; one that does fails to build without it.
// On the bundled emulators (as under make test), where the jobs' events go
// onto the orchestrator queue: not parallel, it sets their endpoints.
func TestQueuesAreNeededOnlyByTheirFunctions(t *testing.T) {
	for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(k, "http://127.0.0.1:1")
	}
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_EVENTBRIDGE", "")
	e := env(t)
	e.Config.Queues = config.Queues{} // lookups by name would fail: nothing listens
	e.Config.OrchestratorQueue = ""
	for _, name := range []string{"events", "embed", "model", "workspace"} {
		if _, err := functionset.Builders()[name](t.Context(), e); err != nil {
			t.Errorf("%s needs no queue, but: %v", name, err)
		}
	}
	// The sandbox channel publishes job events (the orchestrator queue).
	// The app's webhook routes queue replays; the webhooks function its
	// triggers. A message resumes a paused agent whose type says so.
	for _, name := range []string{"create", "alive", "shutdown", "toolcallback", routes.JobWorker, "sandbox", "jobs", "agenttypes", routes.Webhooks, "messages"} {
		if _, err := functionset.Builders()[name](t.Context(), e); err == nil {
			t.Errorf("%s built without finding its queue", name)
		}
	}
}
