package stack

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/jobevents"
)

// The jobs' bus forwards every event of the jobs' source to the orchestrator
// queue (encrypted, redriving to its DLQ), with a DLQ on the rule's target;
// only the publishing functions may put events, on that bus only; the queue is
// an output.
func TestJobEventsReachTheOrchestratorQueue(t *testing.T) {
	for _, env := range []string{"dev", "prod"} {
		tp := synth(t)[env]
		set := tp.stack.Set
		busID, bus := tp.find(t, "AWS::Events::EventBus", "Name", jobevents.BusName(env))
		if env == "dev" && props(bus)["Name"] != "ra-dev-jobs" {
			t.Errorf("bus %v", props(bus))
		}
		_, rule := tp.find(t, "AWS::Events::Rule", "Name", "ra-"+env+"-job-events")
		p := props(rule)
		if ref(p["EventBusName"]) != busID {
			t.Errorf("rule on bus %v, want %s", p["EventBusName"], busID)
		}
		if got := fmt.Sprint(p["EventPattern"]); got != "map[source:["+jobevents.Source+"]]" {
			t.Errorf("rule pattern %s", got)
		}
		targets := p["Targets"].([]any)
		if len(targets) != 1 {
			t.Fatalf("targets %v", targets)
		}
		target := targets[0].(map[string]any)
		queueID, queue := tp.find(t, "AWS::SQS::Queue", "QueueName", set.OrchestratorQueue.Name)
		if ref(target["Arn"]) != queueID {
			t.Errorf("rule targets %v, want the orchestrator queue %s", target["Arn"], queueID)
		}
		if _, ok := target["InputTransformer"]; ok || target["Input"] != nil || target["InputPath"] != nil {
			t.Errorf("the target changes the event: %v", target)
		}
		dlqID, _ := tp.find(t, "AWS::SQS::Queue", "QueueName", "ra-"+env+"-"+JobEventsDLQ)
		if ref(target["DeadLetterConfig"].(map[string]any)["Arn"]) != dlqID {
			t.Errorf("target's dead-letter queue %v, want %s", target["DeadLetterConfig"], dlqID)
		}
		tp.find(t, "AWS::CloudWatch::Alarm", "AlarmName", "ra-"+env+"-"+JobEventsDLQ+"-depth")
		if rp := target["RetryPolicy"].(map[string]any); rp["MaximumRetryAttempts"] != float64(ruleRetryAttempts) {
			t.Errorf("retry policy %v", rp)
		}
		qp := props(queue)
		if qp["SqsManagedSseEnabled"] != true {
			t.Errorf("orchestrator queue not encrypted: %v", qp)
		}
		redriveID, _ := tp.find(t, "AWS::SQS::Queue", "QueueName", set.OrchestratorQueue.DeadLetterName)
		if ref(qp["RedrivePolicy"].(map[string]any)["deadLetterTargetArn"]) != redriveID {
			t.Errorf("orchestrator queue redrives to %v", qp["RedrivePolicy"])
		}
		// EventBridge may send to the queue, for this rule only.
		allowed := false
		for _, pol := range tp.byType("AWS::SQS::QueuePolicy") {
			pp := props(pol)
			if !slices.ContainsFunc(pp["Queues"].([]any), func(q any) bool { return ref(q) == queueID }) {
				continue
			}
			for _, st := range pp["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				principal := fmt.Sprint(st["Principal"])
				if strings.Contains(principal, "events.amazonaws.com") && slices.Contains(list(st["Action"]), "sqs:SendMessage") {
					allowed = strings.Contains(fmt.Sprint(st["Condition"]), "aws:SourceArn")
				}
			}
		}
		if !allowed {
			t.Error("no queue policy lets the rule (and only it) send to the orchestrator queue")
		}

		// events:PutEvents: jobworker (and the jobs function when there is
		// one), on this bus only; no one else, nothing else of EventBridge.
		for _, r := range tp.byType("AWS::Lambda::Function") {
			name, _ := props(r)["FunctionName"].(string)
			fn := strings.TrimPrefix(name, "ra-"+env+"-")
			if name == "" {
				continue
			}
			puts := false
			for _, st := range tp.statements(ref(props(r)["Role"])) {
				for _, a := range list(st["Action"]) {
					if !strings.HasPrefix(a, "events:") {
						continue
					}
					arn, _ := st["Resource"].(map[string]any)
					if a != "events:PutEvents" || fmt.Sprint(arn["Fn::GetAtt"]) != "["+busID+" Arn]" {
						t.Errorf("%s: %s on %v", fn, a, st["Resource"])
					}
					puts = true
				}
			}
			if a, _ := access.For(fn); puts != a.PublishJobEvents {
				want := a.PublishJobEvents
				t.Errorf("%s: may put job events %v, want %v (access.PublishJobEvents)", fn, puts, want)
			}
		}

		outputs := tp.raw.ToJSON()
		out := (*outputs)["Outputs"].(map[string]any)
		if ref(out["OrchestratorQueueUrl"].(map[string]any)["Value"]) != queueID || out["OrchestratorQueueArn"] == nil || out["JobsEventBusName"] == nil {
			t.Errorf("outputs %v", out)
		}
	}
}

// On LocalStack the bus and its rule are the init hook's: the stack grants
// jobworker events:PutEvents on that bus, by name, and outputs the queue.
func TestLocalStackPublishesOnTheInitHooksBus(t *testing.T) {
	tp := synthLocalStack(t)
	for _, r := range tp.byType("AWS::Lambda::Function") {
		name, _ := props(r)["FunctionName"].(string)
		puts := false
		for _, st := range tp.statements(ref(props(r)["Role"])) {
			if slices.Contains(list(st["Action"]), "events:PutEvents") {
				puts = strings.Contains(fmt.Sprint(st["Resource"]), ":event-bus/ra-dev-jobs")
			}
		}
		a, _ := access.For(strings.TrimPrefix(name, "ra-dev-"))
		if want := a.PublishJobEvents; puts != want {
			t.Errorf("%s: may put on ra-dev-jobs %v, want %v", name, puts, want)
		}
	}
	if out := (*tp.raw.ToJSON())["Outputs"].(map[string]any); out["OrchestratorQueueUrl"] == nil {
		t.Errorf("outputs %v", out)
	}
}
