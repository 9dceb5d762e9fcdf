package stack

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestStackPassesAwsSolutionsChecks: cdk-nag's AwsSolutions pack (applied to
// the test stacks by synth) finds nothing in dev or prod that the stack does
// not suppress with a reason (nag.go); a new finding fails here, by resource.
func TestStackPassesAwsSolutionsChecks(t *testing.T) {
	for _, env := range []string{"dev", "prod"} {
		tp := synth(t)[env]
		a := assertions.Annotations_FromStack(tp.stack.Stack)
		rule := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-"))
		var found []string
		for _, level := range []string{"error", "warning"} {
			find := a.FindError
			if level == "warning" {
				find = a.FindWarning
			}
			// Read as JSON: the Go type of a message is deprecated (cloud-assembly-api).
			var msgs []struct {
				ID    string `json:"id"`
				Entry struct {
					Data any `json:"data"`
				} `json:"entry"`
			}
			b, err := json.Marshal(find(jsii.String("*"), rule))
			if err == nil {
				err = json.Unmarshal(b, &msgs)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				msg := fmt.Sprint(m.Entry.Data)
				if i := strings.Index(msg, ". "); i > 0 {
					msg = msg[:i+1] // the rule and its first sentence
				}
				found = append(found, fmt.Sprintf("%s %s: %s", level, m.ID, msg))
			}
		}
		sort.Strings(found)
		if len(found) > 0 {
			t.Errorf("%s: %d AwsSolutions findings neither fixed nor suppressed with a reason (stack/nag.go):\n  %s",
				env, len(found), strings.Join(found, "\n  "))
		}
	}
}

// TestOnlyUnscopableActionsOnEveryResource backs the IAM5 suppressions: the
// only statements on every resource ("*") are of actions that take no
// resource ARN, and the functions' roles hold no managed policy (each writes
// only its own log group).
func TestOnlyUnscopableActionsOnEveryResource(t *testing.T) {
	// ECS takes no resource for registering or describing a task
	// definition (the launcher's definitions of base images).
	// Secrets Manager lists secrets on every one or none (the secrets
	// routes' list filters by the app's prefix). DynamoDB lists streams
	// likewise (a stream's reader; its records only on its stream's ARN).
	unscopable := []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords", "ecr:GetAuthorizationToken",
		"ecs:DescribeTaskDefinition", "ecs:RegisterTaskDefinition", "secretsmanager:ListSecrets", listStreams}
	for env, tp := range synth(t) {
		for id, pol := range tp.byType("AWS::IAM::Policy") {
			for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				if !slices.Contains(list(st["Resource"]), "*") {
					continue
				}
				for _, a := range list(st["Action"]) {
					if !slices.Contains(unscopable, a) {
						t.Errorf("%s: %s allows %s on every resource", env, id, a)
					}
				}
			}
		}
		for _, fn := range tp.byType("AWS::Lambda::Function") {
			name, _ := props(fn)["FunctionName"].(string)
			if name == "" {
				continue // CDK's own helpers
			}
			role := ref(props(fn)["Role"])
			if m := props(tp.res[role])["ManagedPolicyArns"]; m != nil {
				t.Errorf("%s: %s's role has managed policies %v", env, name, m)
			}
			logs, _ := tp.find(t, "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/"+name)
			for _, st := range tp.statements(role) {
				for _, a := range list(st["Action"]) {
					if strings.HasPrefix(a, "logs:") && ref(st["Resource"]) != logs {
						t.Errorf("%s: %s may %s on %v, not only its log group", env, name, a, st["Resource"])
					}
				}
			}
		}
	}
}

// TestApiStageLogsAccessAndThrottles: the API's stage writes a JSON access log
// line per request (who, which route, the answer, its timing; no header, query
// string, path or token) to a log group with retention, and throttles its
// routes (DefaultThrottle without context).
func TestApiStageLogsAccessAndThrottles(t *testing.T) {
	for env, tp := range synth(t) {
		stages := tp.ofHTTPAPI("AWS::ApiGatewayV2::Stage")
		if len(stages) != 1 {
			t.Fatalf("%s: %d stages", env, len(stages))
		}
		for _, st := range stages {
			p := props(st)
			logs, _ := p["AccessLogSettings"].(map[string]any)
			if logs == nil {
				t.Fatalf("%s: the stage has no access log", env)
			}
			group := props(tp.res[ref(logs["DestinationArn"])])
			if group["LogGroupName"] != "/ra/"+env+"/api-access" || group["RetentionInDays"] == nil {
				t.Errorf("%s: access log to %v", env, group)
			}
			var fields map[string]string
			if err := json.Unmarshal([]byte(logs["Format"].(string)), &fields); err != nil {
				t.Fatalf("%s: the access log format is not a JSON object of strings: %v", env, err)
			}
			for _, k := range []string{"requestId", "ip", "httpMethod", "routeKey", "status", "latency", "integrationLatency", "integrationRequestId", "userAgent"} {
				if !strings.HasPrefix(fields[k], "$context.") {
					t.Errorf("%s: access log field %s is %q", env, k, fields[k])
				}
			}
			for k, v := range fields {
				lv := strings.ToLower(v)
				for _, secret := range []string{"header", "authoriz", "token", "querystring", "$context.path", "$request", "body"} {
					if strings.Contains(lv, secret) {
						t.Errorf("%s: access log field %s logs %s", env, k, v)
					}
				}
			}
			route, _ := p["DefaultRouteSettings"].(map[string]any)
			if route["ThrottlingRateLimit"] != DefaultThrottle.Rate || route["ThrottlingBurstLimit"] != float64(DefaultThrottle.Burst) {
				t.Errorf("%s: default route settings %v, want %+v", env, route, DefaultThrottle)
			}
		}
	}
}

// TestEveryRuleTargetHasADeadLetterQueue: an event EventBridge cannot deliver
// to a rule's target is retried, then kept in a dead-letter queue that only
// that rule may send to, and whose depth alarms.
func TestEveryRuleTargetHasADeadLetterQueue(t *testing.T) {
	for env, tp := range synth(t) {
		rules := tp.byType("AWS::Events::Rule")
		if len(rules) == 0 {
			t.Fatalf("%s: no rules", env)
		}
		for id, r := range rules {
			for _, target := range props(r)["Targets"].([]any) {
				target := target.(map[string]any)
				dlqConf, _ := target["DeadLetterConfig"].(map[string]any)
				dlq := ref(dlqConf["Arn"])
				if tp.res[dlq]["Type"] != "AWS::SQS::Queue" {
					t.Errorf("%s: rule %s's target %v has no dead-letter queue", env, id, target["Id"])
					continue
				}
				if dlq == ref(target["Arn"]) {
					t.Errorf("%s: rule %s's target is its own dead-letter queue", env, id)
				}
				retry, _ := target["RetryPolicy"].(map[string]any)
				if retry["MaximumRetryAttempts"] != float64(ruleRetryAttempts) || retry["MaximumEventAgeInSeconds"] != float64(ruleMaxEventAgeHours*3600) {
					t.Errorf("%s: rule %s's retry policy %v", env, id, retry)
				}
				sender := false
				for _, pol := range tp.byType("AWS::SQS::QueuePolicy") {
					if !slices.ContainsFunc(props(pol)["Queues"].([]any), func(q any) bool { return ref(q) == dlq }) {
						continue
					}
					for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
						st := st.(map[string]any)
						if st["Effect"] == "Allow" && fmt.Sprint(st["Principal"]) == "map[Service:events.amazonaws.com]" &&
							strings.Contains(fmt.Sprint(st["Condition"]), id) {
							sender = true
						}
					}
				}
				if !sender {
					t.Errorf("%s: rule %s may not send to its dead-letter queue %s", env, id, dlq)
				}
				alarmed := false
				for _, a := range tp.byType("AWS::CloudWatch::Alarm") {
					dims, _ := props(a)["Dimensions"].([]any) // none: an aggregate metric
					for _, d := range dims {
						if d.(map[string]any)["Name"] == "QueueName" && strings.Contains(fmt.Sprint(d.(map[string]any)["Value"]), dlq) {
							alarmed = true
						}
					}
				}
				if !alarmed {
					t.Errorf("%s: no alarm on the depth of rule %s's dead-letter queue %s", env, id, dlq)
				}
			}
		}
	}
}

func TestThrottleFromContext(t *testing.T) {
	ctx := func(kv map[string]any) func(string) any { return func(k string) any { return kv[k] } }
	for _, c := range []struct {
		ctx  map[string]any
		want Throttle
	}{
		{nil, DefaultThrottle},
		{map[string]any{ThrottleRateKey: "25.5"}, Throttle{Rate: 25.5, Burst: DefaultThrottle.Burst}},
		{map[string]any{ThrottleRateKey: 500.0, ThrottleBurstKey: 1000.0}, Throttle{Rate: 500, Burst: 1000}},
		{map[string]any{ThrottleBurstKey: " 50 ", ThrottleRateKey: ""}, Throttle{Rate: DefaultThrottle.Rate, Burst: 50}},
	} {
		got, err := ThrottleFromContext(ctx(c.ctx))
		if err != nil || got != c.want {
			t.Errorf("%v: %+v, %v; want %+v", c.ctx, got, err, c.want)
		}
	}
	for _, bad := range []map[string]any{
		{ThrottleRateKey: "fast"}, {ThrottleRateKey: "0"}, {ThrottleRateKey: -1.0}, {ThrottleRateKey: "NaN"}, {ThrottleRateKey: "+Inf"},
		{ThrottleBurstKey: "1.5"}, {ThrottleBurstKey: 0.0}, {ThrottleBurstKey: true}, {ThrottleBurstKey: "1e12"},
	} {
		if got, err := ThrottleFromContext(ctx(bad)); err == nil || !strings.Contains(err.Error(), "context apiThrottle") {
			t.Errorf("%v: %+v, %v; want an error naming the key", bad, got, err)
		}
	}
}
