package stack

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// synthLocalStack synthesizes dev's LocalStack variant with placeholder code.
func synthLocalStack(t *testing.T) *template {
	t.Helper()
	code := t.TempDir()
	for _, fn := range routes.Functions() {
		if err := os.WriteFile(filepath.Join(code, fn+".zip"), []byte("placeholder "+fn), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(code, "cdk.out")), Context: featureFlags(t)})
	st := New(app, "RemoteAgents-dev", Props{
		Env: "dev", Target: LocalStack, CodeDir: code, DataDir: "../../data",
		Models: settings["dev"], Routes: routeTable(), Access: accessOf,
	})
	raw := assertions.Template_FromStack(st.Stack, nil)
	b, err := json.Marshal(raw.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Resources map[string]map[string]any }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return &template{stack: st, res: doc.Resources, raw: raw}
}

// communityLocalStack are the resource types the LocalStack variant may use:
// those community LocalStack's CloudFormation deploys (no API Gateway v2,
// CloudFront, ECS, EC2, ECR, Lambda layers, CloudWatch alarms: Pro services).
// The tables, queues and bucket (and the jobs' bus with its rule) are the
// init hook's, not the stack's; the one queue the stack makes is its
// EventBridge rule's dead-letter queue.
var communityLocalStack = []string{
	"AWS::Lambda::Function", "AWS::Lambda::Url", "AWS::Lambda::Permission", "AWS::Lambda::EventSourceMapping",
	"AWS::IAM::Role", "AWS::IAM::Policy", "AWS::Logs::LogGroup", "AWS::SecretsManager::Secret",
	"AWS::Events::Rule", "AWS::SQS::QueuePolicy",
}

func TestLocalStackVariantUsesOnlyCommunityServices(t *testing.T) {
	tp := synthLocalStack(t)
	for id, r := range tp.res {
		typ, _ := r["Type"].(string)
		if typ == "AWS::SQS::Queue" && r["Properties"].(map[string]any)["QueueName"] == "ra-dev-"+SandboxStoppedDLQ {
			continue
		}
		if !slices.Contains(communityLocalStack, typ) {
			t.Errorf("%s: %s is not deployable on community LocalStack (or is the init hook's)", id, typ)
		}
	}
	if n := len(tp.byType("AWS::Events::Rule")); n != 3 {
		t.Errorf("%d EventBridge rules, want the sandbox-stopped one, the sweep and the job sweep", n)
	}
	if n := len(tp.byType("AWS::SecretsManager::Secret")); n == 0 {
		t.Error("no model provider secrets")
	}
}

// Every route is reachable through its function's URL (the router matches
// it by path), streaming where the route streams; every function calls
// LocalStack; the data resources are the ones the init hook makes.
func TestLocalStackVariantServesEveryRouteThroughFunctionURLs(t *testing.T) {
	tp := synthLocalStack(t)
	fnNames := map[string]string{}
	for id, r := range tp.byType("AWS::Lambda::Function") {
		name, _ := props(r)["FunctionName"].(string)
		fnNames[id] = strings.TrimPrefix(name, "ra-dev-")
		vars, _ := props(r)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars["AWS_ENDPOINT_URL"] != LocalStackLambdaEndpoint {
			t.Errorf("%s: AWS_ENDPOINT_URL %v", name, vars["AWS_ENDPOINT_URL"])
		}
		set, _ := resources.For("dev")
		for key, want := range map[string]string{
			"RA_JOBS_QUEUE_URL": "/" + set.JobsQueue.Name, "RA_TOOLS_QUEUE_URL": "/" + set.ToolsQueue.Name,
			"RA_GUARDRAILS_PATH": "s3://" + set.Bucket.Name + "/",
		} {
			if b, _ := json.Marshal(vars[key]); !strings.Contains(string(b), want) {
				t.Errorf("%s: %s is %s, want it to name %s", name, key, b, want)
			}
		}
		// The workers build their Fargate launcher at cold start
		// (fargate.New refuses an empty setting): without ECS its RunTask
		// fails, the worker does not.
		var need []string
		switch fnNames[id] {
		case routes.JobWorker, ToolWorker:
			need = []string{"RA_GATEWAY_URL", "RA_ECS_CLUSTER", "RA_ECS_TASK_DEFINITION", "RA_ECS_CONTAINER", "RA_ECS_SUBNETS"}
		case "create":
			need = []string{"RA_PUBLIC_BASE_URL"}
		}
		for _, key := range need {
			if v, ok := vars[key]; !ok || v == "" {
				t.Errorf("%s: no %s", name, key)
			}
		}
	}
	modes := map[string]string{}
	for _, r := range tp.byType("AWS::Lambda::Url") {
		p := props(r)
		fn := fnNames[ref(p["TargetFunctionArn"])]
		mode, _ := p["InvokeMode"].(string)
		modes[fn] = mode
		if p["AuthType"] != "NONE" {
			t.Errorf("%s: auth %v", fn, p["AuthType"])
		}
	}
	for _, r := range tp.stack.Routes {
		want := "BUFFERED"
		if r.Stream {
			want = "RESPONSE_STREAM"
		}
		if modes[r.Function] != want {
			t.Errorf("%s: %s's function URL is %q, want %s", r.Key(), r.Function, modes[r.Function], want)
		}
	}
	for _, w := range routes.Workers {
		if _, ok := modes[w]; ok {
			t.Errorf("%s, which serves no route, has a function URL", w)
		}
	}
	outputs := tp.raw.FindOutputs(jsii.String("*"), nil)
	for _, fn := range tp.stack.FunctionNames() {
		if _, ok := (*outputs)[logicalID(fn)+"Url"]; !ok && !slices.Contains(routes.Workers, fn) {
			t.Errorf("no output %sUrl", logicalID(fn))
		}
	}
	// The queues' workers; no table's stream: the init hook's tables are
	// referenced by name, and the variant delivers no webhooks as events
	// are written (the webhooks function still consumes its queue).
	set, _ := resources.For("dev")
	got := map[string]string{}
	for _, m := range tp.byType("AWS::Lambda::EventSourceMapping") {
		p := props(m)
		if p["StartingPosition"] != nil {
			t.Errorf("an event source mapping reads a stream: %v", p)
		}
		b, _ := json.Marshal(p["EventSourceArn"])
		for _, q := range set.Queues() {
			if strings.HasSuffix(strings.TrimSuffix(string(b), `"}`), ":"+q.Name) {
				got[q.Name] = fnNames[ref(p["FunctionName"])]
			}
		}
	}
	want := map[string]string{set.JobsQueue.Name: routes.JobWorker, set.ToolsQueue.Name: ToolWorker, set.WebhooksQueue.Name: routes.Webhooks}
	if n := len(tp.byType("AWS::Lambda::EventSourceMapping")); n != len(want) || !maps.Equal(got, want) {
		t.Errorf("%d event source mappings %v, want the jobs and tools workers' and webhooks' on their queues %v", n, got, want)
	}
	for _, r := range tp.byType("AWS::Lambda::Function") {
		for _, st := range tp.statements(ref(props(r)["Role"])) {
			for _, a := range list(st["Action"]) {
				if slices.Contains(access.StreamActions, a) {
					t.Errorf("%s may %s: no stream is read here", props(r)["FunctionName"], a)
				}
			}
		}
	}
}

func TestParseTarget(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Target
		err  bool
	}{{"", AWS, false}, {"aws", AWS, false}, {"sam", SAM, false}, {"localstack", LocalStack, false}, {"LocalStack", "", true}, {"azure", "", true}} {
		got, err := ParseTarget(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ParseTarget(%q) = %q, %v", tt.in, got, err)
		}
	}
}

// LocalStack serves only the services its compose file turns on: every
// resource type of the variant is one of them.
func TestComposeTurnsOnTheVariantsServices(t *testing.T) {
	compose, err := os.ReadFile("../../localstack/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var services []string
	for _, line := range strings.Split(string(compose), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "SERVICES:"); ok {
			services = strings.Split(strings.TrimSpace(v), ",")
		}
	}
	// cdklocal deploys through CloudFormation; its bootstrap stack has a
	// role, a parameter and a bucket.
	for _, want := range []string{"cloudformation", "iam", "ssm", "s3", "sts"} {
		if !slices.Contains(services, want) {
			t.Errorf("SERVICES %v lacks %s (cdklocal)", services, want)
		}
	}
	for _, typ := range communityLocalStack {
		service := strings.ToLower(strings.Split(typ, "::")[1])
		if !slices.Contains(services, service) {
			t.Errorf("SERVICES %v lacks %s (%s)", services, service, typ)
		}
	}
}
