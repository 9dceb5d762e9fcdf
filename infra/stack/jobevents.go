package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// JobEventsDLQ is the short name of the dead-letter queue of the job events
// rule's target (ra-<env>-job-events-dlq): events EventBridge could not
// deliver to the orchestrator queue. The orchestrator queue's own DLQ
// (resources.Set.OrchestratorQueue) takes the messages its consumer fails.
const JobEventsDLQ = "job-events-dlq"

// jobEvents adds the orchestrator jobs' event bus (jobevents.BusName), the
// rule forwarding every event of source jobevents.Source to the orchestrator
// queue (with a dead-letter queue on the target, alarmed on AWS), the
// events:PutEvents grant on that bus to the functions whose access publishes
// job events (jobworker; the jobs function once it declares
// PublishJobEvents), and the orchestrator queue's URL and ARN as outputs.
//
// On LocalStack the bus and the rule are the init hook's (shared/bootstrap,
// from resources.Set.JobEvents), like the queues: the stack references the bus
// by name and only grants.
func (s *Stack) jobEvents(p Props) {
	set := s.Set
	queue := s.Queues[set.OrchestratorQueue.Name]
	if p.Target == LocalStack {
		bus := awsevents.EventBus_FromEventBusName(s.Stack, jsii.String("JobsBus"), jsii.String(set.JobEvents.Bus))
		s.grantPutEvents(bus)
		s.jobEventsOutputs(bus, queue)
		return
	}
	removal := awscdk.RemovalPolicy_DESTROY
	if Prod(p.Env) {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	bus := awsevents.NewEventBus(s.Stack, jsii.String("JobsBus"), &awsevents.EventBusProps{
		EventBusName: jsii.String(set.JobEvents.Bus),
		Description:  jsii.String("Remote Agents orchestrator jobs' events (AGENT.JOB.*)"),
	})
	dlqName := s.name(JobEventsDLQ)
	dlq := awssqs.NewQueue(s.Stack, jsii.String(s.id(dlqName, "Queue")), &awssqs.QueueProps{
		QueueName:       jsii.String(dlqName),
		RetentionPeriod: awscdk.Duration_Seconds(jsii.Number(set.OrchestratorQueue.DeadLetterRetention.Seconds())),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RemovalPolicy:   removal,
	})
	s.Queues[dlqName] = dlq
	awscloudwatch.NewAlarm(s.Stack, jsii.String(s.id(dlqName, "Depth")), &awscloudwatch.AlarmProps{
		AlarmName:          jsii.String(dlqName + "-depth"),
		AlarmDescription:   jsii.String("Job events EventBridge could not deliver to " + set.OrchestratorQueue.Name),
		Metric:             dlq.MetricApproximateNumberOfMessagesVisible(nil),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	awsevents.NewRule(s.Stack, jsii.String("JobEvents"), &awsevents.RuleProps{
		RuleName:     jsii.String(set.JobEvents.Name),
		Description:  jsii.String("The orchestrator jobs' events, to the orchestrator queue"),
		EventBus:     bus,
		EventPattern: &awsevents.EventPattern{Source: jsii.Strings(set.JobEvents.Source)},
		// The queue receives the event as EventBridge has it (the envelope).
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(queue, &awseventstargets.SqsQueueProps{
			DeadLetterQueue: dlq,
			RetryAttempts:   jsii.Number(ruleRetryAttempts),
			MaxEventAge:     awscdk.Duration_Hours(jsii.Number(ruleMaxEventAgeHours)),
		})},
	})
	s.grantPutEvents(bus)
	s.jobEventsOutputs(bus, queue)
}

// grantPutEvents lets the functions that publish job events put events on
// bus, and on nothing else. The tool worker runs jobworker's code but runs no
// orchestrator job: no grant.
func (s *Stack) grantPutEvents(bus awsevents.IEventBus) {
	for _, fn := range s.FunctionNames() {
		if a, ok := s.access(fn); ok && a.PublishJobEvents {
			s.Functions[fn].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("events:PutEvents"),
				Resources: &[]*string{bus.EventBusArn()},
			}))
		}
	}
}

// jobEventsOutputs are the bus's name and where the orchestrator reads.
func (s *Stack) jobEventsOutputs(bus awsevents.IEventBus, queue awssqs.IQueue) {
	awscdk.NewCfnOutput(s.Stack, jsii.String("JobsEventBusName"), &awscdk.CfnOutputProps{
		Value: bus.EventBusName(), Description: jsii.String("The bus the jobs' events are published on"),
	})
	awscdk.NewCfnOutput(s.Stack, jsii.String("OrchestratorQueueUrl"), &awscdk.CfnOutputProps{
		Value: queue.QueueUrl(), Description: jsii.String("Where the orchestrator reads the jobs' events (EventBridge envelopes)"),
	})
	awscdk.NewCfnOutput(s.Stack, jsii.String("OrchestratorQueueArn"), &awscdk.CfnOutputProps{
		Value: queue.QueueArn(), Description: jsii.String("The orchestrator queue's ARN, for the orchestrator's consumer's grant"),
	})
}
