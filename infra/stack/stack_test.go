package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/remote-agents/remote-agents/shared/config"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/remote-agents/remote-agents/infra/models"
	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/metrics"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// template is a synthesized stack as JSON, with the stack for its grants.
type template struct {
	stack *Stack
	res   map[string]map[string]any // logical id → resource
	raw   assertions.Template
}

var (
	once      sync.Once
	templates map[string]*template
	synthErr  error
)

// modelRoute is the route sandboxes call their model through, as the gateway
// declares it; the tests add it to a route table that lacks it.
var modelRoute = routes.Route{Method: "POST", Path: "/sandbox/{sessionId}/model/{provider}/{proxy+}", Function: "model", Stream: true}

// routeTable is the route table with the model route.
func routeTable() []routes.Route {
	rs := routes.All()
	for _, r := range rs {
		if strings.HasPrefix(r.Path, ModelRoutePrefix) {
			return rs
		}
	}
	return append(rs, modelRoute)
}

// accessOf is package access, and for a model function it does not declare
// what the gateway's reads of the session.
func accessOf(fn string) (access.Access, bool) {
	if a, ok := access.For(fn); ok || fn != modelRoute.Function {
		return a, ok
	}
	return access.Access{Tables: map[string][]string{access.Sessions: {access.GetItem, access.UpdateItem}}}, true
}

// settings are each environment's model settings in the tests: dev defaults
// to Bedrock through a US profile, and may also invoke a global profile and a
// foundation model; prod defaults to Anthropic and invokes nothing on Bedrock.
var settings = map[string]models.Settings{
	"dev": {Provider: "bedrock", Model: "claude-sonnet-4.5", Bedrock: []string{
		"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "global.anthropic.claude-haiku-4-5-20251001-v1:0", "amazon.nova-pro-v1:0",
	}},
	"prod": {Provider: "anthropic", Model: "claude-opus-4.5"},
}

// testOrchestrator is the orchestrator's role in the tests' stacks.
const testOrchestrator = "arn:aws:iam::123456789012:role/orchestrator"

// synth builds the dev and prod stacks once for all tests, with placeholder code
// zips (the template does not depend on their content).
func synth(t *testing.T) map[string]*template {
	t.Helper()
	once.Do(func() {
		code, err := os.MkdirTemp("", "ra-code-")
		if err != nil {
			synthErr = err
			return
		}
		fns := slices.Clone(routes.Workers)
		for _, r := range routeTable() {
			fns = append(fns, r.Function)
		}
		for _, fn := range fns {
			if err := os.WriteFile(filepath.Join(code, fn+".zip"), []byte("placeholder "+fn), 0o644); err != nil {
				synthErr = err
				return
			}
		}
		templates = map[string]*template{}
		for _, env := range []string{"dev", "prod"} {
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(code, "cdk.out-"+env)), Context: featureFlags(t)})
			st := New(app, "RemoteAgents-"+env, Props{
				Env: env, CodeDir: code, DataDir: "../../data",
				AllowedOrigins: []string{"https://App.Example.com/", "http://localhost:5173"}, CreationTimeout: 20,
				Models: settings[env], Routes: routeTable(), Access: accessOf,
				OrchestratorRoleARN: testOrchestrator,
			})
			// cdk-nag's AwsSolutions pack checks the stack as it synthesizes
			// (TestStackPassesAwsSolutionsChecks reads its findings).
			awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true), Reports: jsii.Bool(false)}), nil)
			raw := assertions.Template_FromStack(st.Stack, nil)
			b, err := json.Marshal(raw.ToJSON())
			if err != nil {
				synthErr = err
				return
			}
			var doc struct {
				Resources map[string]map[string]any
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				synthErr = err
				return
			}
			templates[env] = &template{stack: st, res: doc.Resources, raw: raw}
		}
	})
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return templates
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// byType returns the resources of a type, by logical id.
func (tp *template) byType(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tp.res {
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

// find returns the logical id of the resource of typ whose property key is value.
func (tp *template) find(t *testing.T, typ, key, value string) (string, map[string]any) {
	t.Helper()
	for id, r := range tp.byType(typ) {
		if props(r)[key] == value {
			return id, r
		}
	}
	t.Fatalf("no %s with %s=%s", typ, key, value)
	return "", nil
}

func ref(v any) string {
	m, _ := v.(map[string]any)
	if s, ok := m["Ref"].(string); ok {
		return s
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) > 0 {
		s, _ := ga[0].(string)
		return s
	}
	return ""
}

func TestTablesAreTheGoDefinition(t *testing.T) {
	for env, tp := range synth(t) {
		set, _ := resources.For(env)
		if got := len(tp.byType("AWS::DynamoDB::Table")); got != len(set.Tables()) {
			t.Errorf("%s: %d tables, the Go definition has %d", env, got, len(set.Tables()))
		}
		for _, want := range set.Tables() {
			_, r := tp.find(t, "AWS::DynamoDB::Table", "TableName", want.Name)
			p := props(r)
			keys := map[string]string{}
			for _, k := range p["KeySchema"].([]any) {
				k := k.(map[string]any)
				keys[k["KeyType"].(string)] = k["AttributeName"].(string)
			}
			types := map[string]string{}
			for _, a := range p["AttributeDefinitions"].([]any) {
				a := a.(map[string]any)
				types[a["AttributeName"].(string)] = a["AttributeType"].(string)
			}
			check := func(what, role string, k *resources.Key, got map[string]string) {
				if k == nil {
					if got[role] != "" {
						t.Errorf("%s %s: %s key %s, the Go definition has none", want.Name, what, role, got[role])
					}
					return
				}
				if got[role] != k.Name || types[k.Name] != string(k.Type) {
					t.Errorf("%s %s: %s key %s (%s), want %s (%s)", want.Name, what, role, got[role], types[got[role]], k.Name, k.Type)
				}
			}
			check("table", "HASH", &want.PartitionKey, keys)
			check("table", "RANGE", want.SortKey, keys)
			var gsis []any
			if g, ok := p["GlobalSecondaryIndexes"].([]any); ok {
				gsis = g
			}
			if len(gsis) != len(want.Indexes) {
				t.Errorf("%s: %d indexes, want %d", want.Name, len(gsis), len(want.Indexes))
			}
			for _, ix := range want.Indexes {
				found := false
				for _, g := range gsis {
					g := g.(map[string]any)
					if g["IndexName"] != ix.Name {
						continue
					}
					found = true
					ikeys := map[string]string{}
					for _, k := range g["KeySchema"].([]any) {
						k := k.(map[string]any)
						ikeys[k["KeyType"].(string)] = k["AttributeName"].(string)
					}
					check("index "+ix.Name, "HASH", &ix.PartitionKey, ikeys)
					check("index "+ix.Name, "RANGE", ix.SortKey, ikeys)
				}
				if !found {
					t.Errorf("%s: no index %s", want.Name, ix.Name)
				}
			}
			ttl, _ := p["TimeToLiveSpecification"].(map[string]any)
			if ttl["AttributeName"] != want.TTLAttribute || ttl["Enabled"] != true {
				t.Errorf("%s: TTL %v, want %s", want.Name, ttl, want.TTLAttribute)
			}
			// A stream of new images where the Go definition has one (the
			// events table's: webhooks), none elsewhere.
			stream, _ := p["StreamSpecification"].(map[string]any)
			if want.Stream && stream["StreamViewType"] != "NEW_IMAGE" || !want.Stream && p["StreamSpecification"] != nil {
				t.Errorf("%s: stream %v, want one of new images: %v", want.Name, p["StreamSpecification"], want.Stream)
			}
			if p["BillingMode"] != "PAY_PER_REQUEST" {
				t.Errorf("%s: billing %v", want.Name, p["BillingMode"])
			}
			policy := "Delete"
			if env == "prod" {
				policy = "Retain"
			}
			if r["DeletionPolicy"] != policy {
				t.Errorf("%s: deletion policy %v, want %s", want.Name, r["DeletionPolicy"], policy)
			}
		}
	}
}

func TestRoutesGoToTheirFunctions(t *testing.T) {
	tp := synth(t)["dev"]
	fnNames := map[string]string{} // logical id → function name
	for id, r := range tp.byType("AWS::Lambda::Function") {
		if name, ok := props(r)["FunctionName"].(string); ok {
			fnNames[id] = name
		}
	}
	integrations := map[string]string{} // integration logical id → function name
	for id, r := range tp.byType("AWS::ApiGatewayV2::Integration") {
		integrations[id] = fnNames[ref(props(r)["IntegrationUri"])]
	}
	served := map[string]string{}
	for _, r := range tp.byType("AWS::ApiGatewayV2::Route") {
		p := props(r)
		if strings.HasPrefix(p["RouteKey"].(string), "$") {
			continue // the push channel's WebSocket routes (TestPushChannel)
		}
		target := p["Target"].(map[string]any)["Fn::Join"].([]any)[1].([]any)
		served[p["RouteKey"].(string)] = integrations[ref(target[1])]
	}
	for _, r := range tp.stack.Routes {
		if r.Stream {
			continue
		}
		if got := served[r.Key()]; got != "ra-dev-"+r.Function {
			t.Errorf("%s goes to %q, want ra-dev-%s", r.Key(), got, r.Function)
		}
		delete(served, r.Key())
	}
	for key, fn := range served {
		t.Errorf("the API has %s → %s, which the route table lacks", key, fn)
	}
	var names []string
	for _, n := range fnNames {
		names = append(names, n)
	}
	sort.Strings(names)
	var want []string
	for _, f := range append(tp.stack.FunctionNames(), ToolWorker) {
		want = append(want, "ra-dev-"+f)
	}
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Errorf("named functions %v, want %v", names, want)
	}
	for id, r := range tp.byType("AWS::Lambda::Function") {
		p := props(r)
		if fnNames[id] == "" {
			continue // CDK's own helpers (bucket deployment, auto-delete)
		}
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" || fmt.Sprint(p["Architectures"]) != "[arm64]" {
			t.Errorf("%s: %v %v %v", fnNames[id], p["Runtime"], p["Handler"], p["Architectures"])
		}
	}
}

func TestWorkersConsumeTheirQueues(t *testing.T) {
	tp := synth(t)["dev"]
	set := tp.stack.Set
	queues := map[string]string{}
	for id, r := range tp.byType("AWS::SQS::Queue") {
		p := props(r)
		queues[id] = p["QueueName"].(string)
		if redrive, ok := p["RedrivePolicy"].(map[string]any); ok {
			if redrive["maxReceiveCount"] != float64(5) {
				t.Errorf("%s: maxReceiveCount %v", p["QueueName"], redrive["maxReceiveCount"])
			}
		}
	}
	// Each queue of the Go definition and its DLQ, and the DLQs of the
	// stopped-sandbox rule and of the job events rule.
	if len(queues) != 2*len(set.Queues())+2 {
		t.Errorf("%d queues: %v", len(queues), queues)
	}
	for _, q := range set.Queues() {
		_, r := tp.find(t, "AWS::SQS::Queue", "QueueName", q.Name)
		redrive := props(r)["RedrivePolicy"].(map[string]any)
		if queues[ref(redrive["deadLetterTargetArn"])] != q.DeadLetterName {
			t.Errorf("%s redrives to %v", q.Name, redrive)
		}
	}
	fnNames := map[string]string{}
	for id, r := range tp.byType("AWS::Lambda::Function") {
		fnNames[id], _ = props(r)["FunctionName"].(string)
	}
	got := map[string]string{}
	for _, m := range tp.byType("AWS::Lambda::EventSourceMapping") {
		p := props(m)
		if p["StartingPosition"] != nil {
			continue // a table's stream (TestWebhooksReadTheEventsStream)
		}
		if fmt.Sprint(p["FunctionResponseTypes"]) != "[ReportBatchItemFailures]" {
			t.Errorf("event source without partial batch failures: %v", p)
		}
		got[queues[ref(p["EventSourceArn"])]] = fnNames[ref(p["FunctionName"])]
		// A message must stay invisible for longer than the function may run on it.
		fnTimeout := props(tp.res[ref(p["FunctionName"])])["Timeout"].(float64)
		visibility := props(tp.res[ref(p["EventSourceArn"])])["VisibilityTimeout"].(float64)
		if fnTimeout >= visibility {
			t.Errorf("%s: timeout %vs, its queue's visibility timeout %vs", fnNames[ref(p["FunctionName"])], fnTimeout, visibility)
		}
	}
	want := map[string]string{set.JobsQueue.Name: "ra-dev-jobworker", set.ToolsQueue.Name: "ra-dev-toolworker", set.WebhooksQueue.Name: "ra-dev-webhooks"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("event sources %v, want %v", got, want)
	}
	// ECS task-state changes reach the jobs queue, and a sweep every minute
	// (the job events' rule has its own test).
	rules := tp.byType("AWS::Events::Rule")
	if len(rules) != 4 {
		t.Fatalf("%d rules", len(rules))
	}
	for _, r := range rules {
		p := props(r)
		if p["Name"] == "ra-dev-job-events" || p["Name"] == "ra-dev-job-sweep" {
			continue // TestJobEventsReachTheOrchestratorQueue, TestJobSweepIsScheduled
		}
		target := p["Targets"].([]any)[0].(map[string]any)
		if queues[ref(target["Arn"])] != set.JobsQueue.Name {
			t.Errorf("rule %v", p)
		}
		switch p["Name"] {
		case "ra-dev-sandbox-stopped":
			if fmt.Sprint(p["EventPattern"].(map[string]any)["detail-type"]) != "[ECS Task State Change]" {
				t.Errorf("rule %v", p)
			}
		case "ra-dev-sweep":
			if p["ScheduleExpression"] != "rate(1 minute)" || target["Input"] != `{"type":"sweep"}` {
				t.Errorf("sweep rule %v", p)
			}
			if _, err := jobqueue.Parse(target["Input"].(string)); err != nil {
				t.Errorf("the sweep rule's message: %v", err)
			}
		default:
			t.Errorf("rule %v", p["Name"])
		}
	}
}

// statements returns the policy statements attached to a role.
func (tp *template) statements(role string) []map[string]any {
	var out []map[string]any
	for _, pol := range tp.byType("AWS::IAM::Policy") {
		p := props(pol)
		attached := false
		for _, r := range p["Roles"].([]any) {
			if ref(r) == role {
				attached = true
			}
		}
		if !attached {
			continue
		}
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			out = append(out, s.(map[string]any))
		}
	}
	return out
}

// resourceList is a statement's Resource as a list.
func resourceList(v any) []any {
	if rs, ok := v.([]any); ok {
		return rs
	}
	return []any{v}
}

// getAttName is the attribute an Fn::GetAtt names ("" for anything else).
func getAttName(v any) string {
	m, _ := v.(map[string]any)
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
		s, _ := ga[1].(string)
		return s
	}
	return ""
}

func list(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func TestEachFunctionGetsOnlyItsGrants(t *testing.T) {
	tp := synth(t)["dev"]
	tableIDs := map[string]string{}
	for id, r := range tp.byType("AWS::DynamoDB::Table") {
		tableIDs[id] = props(r)["TableName"].(string)
	}
	queueIDs := map[string]string{}
	for id, r := range tp.byType("AWS::SQS::Queue") {
		queueIDs[id] = props(r)["QueueName"].(string)
	}
	// A stream's actions but ListStreams are on the stream's ARN.
	streamRead := slices.DeleteFunc(slices.Clone(access.StreamActions), func(a string) bool { return a == listStreams })
	sort.Strings(streamRead)
	grants := tp.stack.Grants()
	for _, r := range tp.byType("AWS::Lambda::Function") {
		name, _ := props(r)["FunctionName"].(string)
		if name == "" {
			continue
		}
		fn := strings.TrimPrefix(name, "ra-dev-")
		want := grants[fn]
		got := map[string][]string{}
		streams := map[string][]string{} // table → actions on its stream
		listed := false                  // ListStreams (on "*")
		sent := map[string]bool{}
		for _, st := range tp.statements(ref(props(r)["Role"])) {
			actions := list(st["Action"])
			resourcesOf := st["Resource"]
			if slices.Contains(actions, "sqs:SendMessage") {
				// Sends: exactly the queues its access names.
				for _, res := range resourceList(resourcesOf) {
					q := strings.TrimPrefix(queueIDs[ref(res)], "ra-dev-")
					if !slices.Contains(want.Send, q) {
						t.Errorf("%s may send to %v, which its access does not name (%v)", fn, res, want.Send)
					}
					sent[q] = true
				}
			}
			if strings.HasPrefix(fmt.Sprint(actions), "[dynamodb:") {
				// A query may read the table's indexes: each index's ARN
				// follows the table's, granted only with Query, never
				// index/*. Tables granted the same actions under the same
				// condition share a statement (IAM's minimized policies).
				rs, _ := resourcesOf.([]any)
				query := slices.Contains(actions, "dynamodb:Query")
				for _, r := range rs {
					if s := fmt.Sprint(r); strings.Contains(s, "/index/") && (!query || strings.Contains(s, "*")) {
						t.Errorf("%s: %v on %v: a table's indexes, each by name, granted only with Query", fn, actions, resourcesOf)
					}
				}
			}
			for _, a := range actions {
				if slices.Contains(access.StreamActions, a) {
					// A table's stream (access.Streams): on the stream's
					// ARN, and ListStreams, which takes no resource, on "*".
					for _, res := range resourceList(resourcesOf) {
						switch {
						case a == listStreams && res == "*":
							listed = true
						case a != listStreams && getAttName(res) == "StreamArn" && tableIDs[ref(res)] != "":
							table := strings.TrimPrefix(tableIDs[ref(res)], "ra-dev-")
							streams[table] = append(streams[table], a)
						default:
							t.Errorf("%s: %s on %v, not a table's stream", fn, a, res)
						}
					}
					if st["Condition"] != nil {
						t.Errorf("%s: %s under condition %v", fn, a, st["Condition"])
					}
					continue
				}
				data := strings.HasPrefix(a, "dynamodb:") || strings.HasPrefix(a, "s3:") || strings.HasPrefix(a, "sqs:SendMessage") ||
					(strings.HasPrefix(a, "secretsmanager:") && a != "secretsmanager:ListSecrets") || strings.HasPrefix(a, "bedrock:")
				if data && fmt.Sprint(resourcesOf) == "*" {
					t.Errorf("%s: %s on every resource", fn, a)
				}
				if a == "ecs:DescribeTasks" || strings.HasSuffix(a, ":*") || a == "*" {
					t.Errorf("%s: granted %s", fn, a)
				}
				if !strings.HasPrefix(a, "dynamodb:") {
					continue
				}
				tables := []any{resourcesOf}
				if rs, ok := resourcesOf.([]any); ok {
					tables = slices.DeleteFunc(slices.Clone(rs), func(r any) bool { return strings.Contains(fmt.Sprint(r), "/index/") })
				}
				for _, res := range tables {
					table := strings.TrimPrefix(tableIDs[ref(res)], "ra-dev-")
					got[table] = append(got[table], a)
					// Items: exactly the declared partition key prefixes, or all.
					prefixes := want.LeadingKeys[table]
					if w, ok := want.WriteKeys[table]; ok && (a == "dynamodb:PutItem" || a == "dynamodb:UpdateItem" || a == "dynamodb:DeleteItem") {
						prefixes = w // writes: only the items WriteKeys names
					}
					var patterns []string
					for _, p := range prefixes {
						patterns = append(patterns, p+"*")
					}
					if len(prefixes) > 0 && !(want.WriteKeys[table] != nil && (a == "dynamodb:PutItem" || a == "dynamodb:UpdateItem" || a == "dynamodb:DeleteItem")) {
						patterns = append(patterns, want.IndexKeys[table]...) // index partitions: exact
					}
					cond, _ := st["Condition"].(map[string]any)
					like, _ := cond["ForAllValues:StringLike"].(map[string]any)
					if got := list(like["dynamodb:LeadingKeys"]); !slices.Equal(got, patterns) || len(cond) > min(len(patterns), 1) || len(like) > min(len(patterns), 1) {
						t.Errorf("%s: %s on %s under condition %v, want the items %v", fn, a, table, st["Condition"], patterns)
					}
				}
			}
		}
		for table, actions := range got {
			sort.Strings(actions)
			w := slices.Clone(want.Tables[table])
			sort.Strings(w)
			if !slices.Equal(actions, w) {
				t.Errorf("%s on %s: %v, its code uses %v", fn, table, actions, w)
			}
		}
		for table := range want.Tables {
			if _, ok := got[table]; !ok {
				t.Errorf("%s: nothing granted on %s", fn, table)
			}
		}
		for table, actions := range streams {
			sort.Strings(actions)
			if !slices.Contains(want.Streams, table) || !slices.Equal(slices.Compact(actions), streamRead) {
				t.Errorf("%s on the stream of %s: %v; its access reads the streams of %v (%v)", fn, table, actions, want.Streams, access.StreamActions)
			}
		}
		for _, table := range want.Streams {
			if _, ok := streams[table]; !ok {
				t.Errorf("%s: nothing granted on the stream of %s", fn, table)
			}
		}
		if listed != (len(want.Streams) > 0) {
			t.Errorf("%s: %s %v, reads streams %v", fn, listStreams, listed, want.Streams)
		}
		for _, q := range want.Send {
			if !sent[q] {
				t.Errorf("%s may not send to %s, which its access names", fn, q)
			}
		}
	}
	// The sandbox task role has no policy at all.
	for id, r := range tp.byType("AWS::IAM::Role") {
		if strings.HasPrefix(id, "SandboxTaskRole") {
			if st := tp.statements(id); len(st) > 0 || props(r)["ManagedPolicyArns"] != nil {
				t.Errorf("the sandbox task role has permissions: %v", st)
			}
		}
	}
}

func TestBucketIsPrivateAndEncrypted(t *testing.T) {
	tp := synth(t)["dev"]
	_, r := tp.find(t, "AWS::S3::Bucket", "BucketName", tp.stack.Set.Bucket.Name)
	p := props(r)
	block := p["PublicAccessBlockConfiguration"].(map[string]any)
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if block[k] != true {
			t.Errorf("%s not set", k)
		}
	}
	if p["BucketEncryption"] == nil {
		t.Error("no encryption")
	}
	rules := fmt.Sprint(p["LifecycleConfiguration"])
	if !strings.Contains(rules, "logs/") {
		t.Errorf("no lifecycle for logs: %s", rules)
	}
	// Finished jobs' files expire with their items (RA_JOB_RETENTION_DAYS).
	jobFiles := false
	for _, r := range p["LifecycleConfiguration"].(map[string]any)["Rules"].([]any) {
		r := r.(map[string]any)
		if r["Prefix"] == "jobs/" && r["ExpirationInDays"] == float64(config.DefaultJobRetentionDays) && r["Status"] == "Enabled" {
			jobFiles = true
		}
	}
	if !jobFiles {
		t.Errorf("no lifecycle for job files (jobs/, %d days): %s", config.DefaultJobRetentionDays, rules)
	}
	denied := false
	for _, pol := range tp.byType("AWS::S3::BucketPolicy") {
		for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			if st["Effect"] == "Deny" && strings.Contains(fmt.Sprint(st["Condition"]), "aws:SecureTransport:false") {
				denied = true
			}
		}
	}
	if !denied {
		t.Error("the bucket policy does not deny requests without TLS")
	}
	sealed := false
	for _, pol := range tp.byType("AWS::S3::BucketPolicy") {
		for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			if st["Effect"] == "Deny" && st["Action"] == "s3:PutObject" && strings.Contains(fmt.Sprint(st["Resource"]), "/configurations/*/*/env.json") &&
				strings.Contains(fmt.Sprint(st["Condition"]), "StringNotEquals:map[s3:x-amz-server-side-encryption:AES256]") {
				sealed = true
			}
		}
	}
	if !sealed {
		t.Error("the bucket policy lets persisted env values be written without server-side encryption")
	}
	tp.raw.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), map[string]any{"LogGroupName": "/aws/lambda/ra-dev-create", "RetentionInDays": 14})
}

// Sandbox tasks run on the FARGATE capacity provider, and a launch that fails
// is retried on FARGATE_SPOT: the cluster has both, and the workers are told
// where to start (RA_ECS_CAPACITY_PROVIDER).
func TestSandboxesHaveAFallbackCapacity(t *testing.T) {
	tp := synth(t)["dev"]
	tp.raw.HasResourceProperties(jsii.String("AWS::ECS::ClusterCapacityProviderAssociations"), map[string]any{
		"CapacityProviders": []any{"FARGATE", "FARGATE_SPOT"},
	})
	_, worker := tp.find(t, "AWS::Lambda::Function", "FunctionName", "ra-dev-jobworker")
	vars, _ := props(worker)["Environment"].(map[string]any)["Variables"].(map[string]any)
	if vars["RA_ECS_CAPACITY_PROVIDER"] != "FARGATE" {
		t.Errorf("jobworker's RA_ECS_CAPACITY_PROVIDER = %v", vars["RA_ECS_CAPACITY_PROVIDER"])
	}
}

// The orchestrator's routes take IAM authorization, the others none, and the
// jobs function knows the one role it serves (the environment's context value).
func TestInternalRoutesTakeOnlyTheOrchestrator(t *testing.T) {
	tp := synth(t)["dev"]
	iam := 0
	for _, r := range tp.byType("AWS::ApiGatewayV2::Route") {
		p := props(r)
		key := p["RouteKey"].(string)
		internal := strings.Contains(key, routes.InternalPrefix)
		if got := p["AuthorizationType"] == "AWS_IAM"; got != internal {
			t.Errorf("%s: authorization %v", key, p["AuthorizationType"])
		}
		if internal {
			iam++
		}
	}
	want := 0
	for _, r := range routes.All() {
		if r.Internal && !r.Stream { // a stream is at its function's URL (below)
			want++
		}
	}
	if iam != want || want < 9 {
		t.Errorf("%d routes with IAM authorization, want the %d /internal/ routes", iam, want)
	}
	for _, name := range []string{"jobs", "joblogs"} {
		_, fn := tp.find(t, "AWS::Lambda::Function", "FunctionName", "ra-dev-"+name)
		vars := props(fn)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if got, _ := vars["RA_ORCHESTRATOR_ROLE_ARN"].(string); got != testOrchestrator {
			t.Errorf("%s: RA_ORCHESTRATOR_ROLE_ARN = %v, want %s", name, vars["RA_ORCHESTRATOR_ROLE_ARN"], testOrchestrator)
		}
	}
	// The job log stream's URL (IAM): invokable by the orchestrator's role
	// alone, and an output.
	fnID, _ := tp.find(t, "AWS::Lambda::Function", "FunctionName", "ra-dev-joblogs")
	invokers := 0
	for _, r := range tp.byType("AWS::Lambda::Permission") {
		p := props(r)
		if ref(p["FunctionName"]) != fnID || p["Action"] != "lambda:InvokeFunctionUrl" {
			continue
		}
		invokers++
		if p["Principal"] != testOrchestrator || p["FunctionUrlAuthType"] != "AWS_IAM" {
			t.Errorf("joblogs URL permission %v, want %s with AWS_IAM", p, testOrchestrator)
		}
	}
	if invokers != 1 {
		t.Errorf("%d permissions to invoke the joblogs URL, want the orchestrator's", invokers)
	}
	if _, ok := (*tp.raw.FindOutputs(jsii.String("JobLogStreamUrl"), nil))["JobLogStreamUrl"]; !ok {
		t.Error("no output JobLogStreamUrl")
	}
}

// A schedule sends job.sweep to the jobs queue once a minute.
func TestJobSweepIsScheduled(t *testing.T) {
	tp := synth(t)["dev"]
	_, rule := tp.find(t, "AWS::Events::Rule", "Name", "ra-dev-job-sweep")
	p := props(rule)
	targets, _ := p["Targets"].([]any)
	if p["ScheduleExpression"] != "rate(1 minute)" || len(targets) != 1 {
		t.Fatalf("job sweep rule %v", p)
	}
	target := targets[0].(map[string]any)
	queueID, _ := tp.find(t, "AWS::SQS::Queue", "QueueName", "ra-dev-jobs")
	if ref(target["Arn"]) != queueID || target["Input"] != `{"type":"job.sweep"}` {
		t.Errorf("job sweep target %v", target)
	}
}

// TestPlatformMetricAlarms: the stack alarms on a day's model cost at the
// environment's threshold, on sessions ended at their maximum time, and on
// an app at 80% and at 100% of its spend caps, from the platform's own
// metrics (package metrics).
func TestPlatformMetricAlarms(t *testing.T) {
	tp := synth(t)["dev"]
	found := map[string]map[string]any{}
	budget := map[float64]bool{}
	for _, r := range tp.byType("AWS::CloudWatch::Alarm") {
		p := props(r)
		if p["Namespace"] == metrics.Namespace {
			found[p["MetricName"].(string)] = p
		}
		if p["MetricName"] == metrics.BudgetUsedPercent && p["Statistic"] == "Maximum" && p["Namespace"] == metrics.Namespace {
			budget[p["Threshold"].(float64)] = true
		}
	}
	if !budget[80] || !budget[100] || len(budget) != 2 {
		t.Errorf("app budget alarms at %v, want 80 and 100 (percent)", budget)
	}
	cost, max := found[metrics.ModelCostUSD], found[metrics.SessionsAtMaxDuration]
	if cost == nil || cost["Statistic"] != "Sum" || cost["Period"] != float64(86400) || cost["Threshold"] != float64(DefaultDailyCostAlarmUSD) {
		t.Errorf("daily cost alarm: %v", cost)
	}
	if max == nil || max["Statistic"] != "Sum" || max["Threshold"] != float64(1) {
		t.Errorf("sessions at their maximum alarm: %v", max)
	}
}

// TestLaunchersRunBaseImageDefinitions: a function that launches sandboxes
// may run the sandbox task definition and the ones it registers for base
// images (their family only), and register and describe definitions.
func TestLaunchersRunBaseImageDefinitions(t *testing.T) {
	tp := synth(t)["dev"]
	for _, r := range tp.byType("AWS::Lambda::Function") {
		if name, _ := props(r)["FunctionName"].(string); name != "ra-dev-jobworker" {
			continue
		}
		var run, register string
		for _, st := range tp.statements(ref(props(r)["Role"])) {
			actions := list(st["Action"])
			if slices.Contains(actions, "ecs:RunTask") {
				run = fmt.Sprint(st["Resource"])
			}
			if slices.Contains(actions, "ecs:RegisterTaskDefinition") && slices.Contains(actions, "ecs:DescribeTaskDefinition") {
				register = fmt.Sprint(st["Resource"])
			}
		}
		if !strings.Contains(run, "SandboxTask") || !strings.Contains(run, ":task-definition/ra-dev-sandbox-img-*:*") {
			t.Errorf("jobworker runs %s: want the sandbox task and its base images' definitions", run)
		}
		if register != "*" {
			t.Errorf("jobworker registers and describes task definitions on %q, want *", register)
		}
		return
	}
	t.Fatal("no jobworker function")
}

// featureFlags are the CDK feature flags of the app's cdk.json, for test
// apps to synthesize as the app does.
func featureFlags(t testing.TB) *map[string]any {
	t.Helper()
	b, err := os.ReadFile("../cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	flags := map[string]any{}
	for k, v := range cfg.Context {
		if strings.HasPrefix(k, "@aws-cdk") {
			flags[k] = v
		}
	}
	return &flags
}
