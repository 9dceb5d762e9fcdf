package stack

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// TestWebhooksReadTheEventsStream: the events table has a stream of new
// images; the webhooks function consumes the webhooks queue (batches of 10,
// partial batch failures) and reads that stream from its newest record,
// inserts only, a failed batch retried 20 times, bisected, then recorded in
// the webhooks DLQ. Its role reads that stream (ListStreams, which takes no
// resource, on "*") and sends to the webhooks queue and its DLQ, no other
// queue; the functions are told both queues' URLs, and none lets endpoints
// be on loopback (RA_WEBHOOKS_LOOPBACK unset: false).
func TestWebhooksReadTheEventsStream(t *testing.T) {
	for env, tp := range synth(t) {
		set := tp.stack.Set
		if !set.Events.Stream {
			t.Fatalf("%s: the Go definition's events table has no stream", env)
		}
		tableID, table := tp.find(t, "AWS::DynamoDB::Table", "TableName", set.Events.Name)
		if spec, _ := props(table)["StreamSpecification"].(map[string]any); spec["StreamViewType"] != "NEW_IMAGE" {
			t.Errorf("%s: the events table's stream %v, want NEW_IMAGE", env, props(table)["StreamSpecification"])
		}
		fnID, fn := tp.find(t, "AWS::Lambda::Function", "FunctionName", "ra-"+env+"-"+routes.Webhooks)
		queueID, queue := tp.find(t, "AWS::SQS::Queue", "QueueName", set.WebhooksQueue.Name)
		dlqID, _ := tp.find(t, "AWS::SQS::Queue", "QueueName", set.WebhooksQueue.DeadLetterName)
		if ref(props(queue)["RedrivePolicy"].(map[string]any)["deadLetterTargetArn"]) != dlqID || props(queue)["SqsManagedSseEnabled"] != true {
			t.Errorf("%s: the webhooks queue %v", env, props(queue))
		}
		timeout, visibility := props(fn)["Timeout"].(float64), props(queue)["VisibilityTimeout"].(float64)
		if timeout >= visibility || timeout < 150 {
			t.Errorf("%s: webhooks' timeout %vs, its queue's visibility timeout %vs: want at least 150 s (a run: a minute of sending, an attempt), below the visibility", env, timeout, visibility)
		}

		var fromQueue, fromStream map[string]any
		for id, m := range tp.byType("AWS::Lambda::EventSourceMapping") {
			p := props(m)
			source := p["EventSourceArn"]
			if getAttName(source) == "StreamArn" && ref(p["FunctionName"]) != fnID {
				t.Errorf("%s: %s reads a stream for %v: only the webhooks function does", env, id, p["FunctionName"])
			}
			if ref(p["FunctionName"]) != fnID {
				continue
			}
			switch {
			case ref(source) == queueID && fromQueue == nil:
				fromQueue = p
			case ref(source) == tableID && getAttName(source) == "StreamArn" && fromStream == nil:
				fromStream = p
			default:
				t.Errorf("%s: webhooks has the event source %v", env, p)
			}
		}
		if fromQueue == nil || fromStream == nil {
			t.Fatalf("%s: webhooks' event sources: queue %v, stream %v", env, fromQueue, fromStream)
		}
		if fromQueue["BatchSize"] != float64(10) || fmt.Sprint(fromQueue["FunctionResponseTypes"]) != "[ReportBatchItemFailures]" {
			t.Errorf("%s: webhooks on its queue: %v", env, fromQueue)
		}
		onFailure, _ := fromStream["DestinationConfig"].(map[string]any)["OnFailure"].(map[string]any)
		if fromStream["StartingPosition"] != "LATEST" || fromStream["BatchSize"] != float64(streamBatchSize) ||
			fromStream["MaximumRetryAttempts"] != float64(streamRetryAttempts) || fromStream["BisectBatchOnFunctionError"] != true ||
			ref(onFailure["Destination"]) != dlqID || fromStream["FunctionResponseTypes"] != nil {
			t.Errorf("%s: webhooks on the events table's stream: %v; want from LATEST, batches of %d, %d retries, bisected, then to %s",
				env, fromStream, streamBatchSize, streamRetryAttempts, set.WebhooksQueue.DeadLetterName)
		}
		var patterns []string
		for _, f := range fromStream["FilterCriteria"].(map[string]any)["Filters"].([]any) {
			patterns = append(patterns, f.(map[string]any)["Pattern"].(string))
		}
		if fmt.Sprint(patterns) != `[{"eventName":["INSERT"]}]` {
			t.Errorf("%s: the stream's filters %v, want inserts only", env, patterns)
		}

		// The role: the stream read, the two queues written.
		streamActions := map[string]bool{}
		var sends []string
		for _, st := range tp.statements(ref(props(fn)["Role"])) {
			for _, a := range list(st["Action"]) {
				for _, res := range resourceList(st["Resource"]) {
					switch {
					case slices.Contains(access.StreamActions, a) && a == listStreams && res == "*",
						slices.Contains(access.StreamActions, a) && ref(res) == tableID && getAttName(res) == "StreamArn":
						streamActions[a] = true
					case slices.Contains(access.StreamActions, a):
						t.Errorf("%s: webhooks may %s on %v", env, a, res)
					case a == "sqs:SendMessage":
						sends = append(sends, queueName(tp, res))
					}
				}
			}
		}
		for _, a := range access.StreamActions {
			if !streamActions[a] {
				t.Errorf("%s: webhooks may not %s on the events table's stream", env, a)
			}
		}
		slices.Sort(sends)
		if want := []string{set.WebhooksQueue.Name, set.WebhooksQueue.DeadLetterName}; !slices.Equal(slices.Compact(sends), want) {
			t.Errorf("%s: webhooks sends to %v, want %v", env, sends, want)
		}

		// The queues' URLs, for the functions that send there.
		for id, r := range tp.byType("AWS::Lambda::Function") {
			name, _ := props(r)["FunctionName"].(string)
			if !strings.HasPrefix(name, "ra-"+env+"-") {
				continue
			}
			vars, _ := props(r)["Environment"].(map[string]any)["Variables"].(map[string]any)
			if _, ok := vars["RA_WEBHOOKS_LOOPBACK"]; ok {
				t.Errorf("%s: %s sets RA_WEBHOOKS_LOOPBACK", env, name)
			}
			a := tp.stack.Grants()[strings.TrimPrefix(name, "ra-"+env+"-")]
			if slices.Contains(a.Send, access.WebhooksQueue) || id == fnID {
				if ref(vars["RA_WEBHOOKS_QUEUE_URL"]) != queueID || ref(vars["RA_WEBHOOKS_DLQ_URL"]) != dlqID {
					t.Errorf("%s: %s's RA_WEBHOOKS_QUEUE_URL %v, RA_WEBHOOKS_DLQ_URL %v", env, name, vars["RA_WEBHOOKS_QUEUE_URL"], vars["RA_WEBHOOKS_DLQ_URL"])
				}
			}
		}

		// What failed for a day, and a batch the stream gave up on, alarm.
		tp.find(t, "AWS::CloudWatch::Alarm", "AlarmName", "ra-"+env+"-"+strings.ToLower(tp.stack.id(set.WebhooksQueue.DeadLetterName, "Depth")))
		tp.find(t, "AWS::CloudWatch::Alarm", "AlarmName", "ra-"+env+"-webhookserrors")
	}
}

// queueName is the name of the queue a statement's resource names.
func queueName(tp *template, res any) string {
	if q, ok := tp.res[ref(res)]; ok && q["Type"] == "AWS::SQS::Queue" {
		return props(q)["QueueName"].(string)
	}
	b, _ := json.Marshal(res)
	return string(b)
}
