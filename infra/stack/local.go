package stack

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/shared/routes"
)

// Target is where a stack runs.
type Target string

// The targets.
const (
	// AWS is the stack as deployed to AWS.
	AWS Target = ""
	// SAM is AWS's stack, never deployed, for `sam local start-api`: every
	// function also declares SAMVariables, the only variables SAM lets an
	// --env-vars file override (it drops the others), with LocalStack's
	// values, so that the functions call LocalStack and never AWS with the
	// shell's credentials. (Lambda refuses AWS_REGION and the credentials'
	// variables in a deployed function: they are reserved.)
	SAM Target = "sam"
	// LocalStack is the variant community LocalStack deploys (cdklocal): no
	// API Gateway v2, CloudFront or ECS (LocalStack Pro services); each
	// function of a route behind its own function URL, whose requests its
	// router matches by path (httpapi.Router); the tables, queues and bucket
	// the LocalStack init hook made (bootstrap: with the guardrails and the
	// seed data), referenced by name. It delivers no webhooks as agents'
	// events are written: the webhooks function does not read the events
	// table's stream there (it still consumes its queue: replays).
	LocalStack Target = "localstack"
)

// ParseTarget parses the target context: "" or "aws", "sam", "localstack".
func ParseTarget(v string) (Target, error) {
	switch Target(v) {
	case AWS, "aws":
		return AWS, nil
	case SAM, LocalStack:
		return Target(v), nil
	}
	return "", fmt.Errorf("context target: %q is none of aws, sam, localstack", v)
}

// Endpoints of LocalStack: from the host (and from `sam local`'s containers on
// the host network), and from the Lambda containers LocalStack runs.
const (
	LocalStackEndpoint       = "http://localhost:4566"
	LocalStackLambdaEndpoint = "http://localhost.localstack.cloud:4566"
	// LocalStackAccount is LocalStack's default account.
	LocalStackAccount = "000000000000"
)

// SAMVariables are the variables the SAM target declares on every function,
// with LocalStack's endpoint, region and credentials: `sam local` gives a
// function the shell's credentials and region unless the template declares
// these (and localstack/sam-env.json may override them).
var SAMVariables = map[string]string{
	"AWS_ENDPOINT_URL":      LocalStackEndpoint,
	"AWS_REGION":            "us-east-1",
	"AWS_ACCESS_KEY_ID":     "test",
	"AWS_SECRET_ACCESS_KEY": "test",
	"AWS_SESSION_TOKEN":     "",
}

// Variables are the variables every function of the target declares on top
// of the stack's own, but for the SAM target's (declareSAM).
func (t Target) Variables() map[string]string {
	if t == LocalStack {
		// LocalStack's Lambda containers reach it at this name.
		return map[string]string{"AWS_ENDPOINT_URL": LocalStackLambdaEndpoint}
	}
	return nil
}

// declareSAM declares SAMVariables on every function of the SAM target, in
// the template itself: CDK refuses Lambda's reserved names in a function's
// environment, and rightly so for a template to deploy.
func (s *Stack) declareSAM(p Props) {
	if p.Target != SAM {
		return
	}
	for _, fn := range s.Functions {
		cfn := fn.Node().DefaultChild().(awslambda.CfnFunction)
		for k, v := range SAMVariables {
			cfn.AddPropertyOverride(jsii.String("Environment.Variables."+k), v)
		}
	}
}

// URLs are the function URLs of the LocalStack variant, by function.
func (s *Stack) URLs() map[string]awslambda.FunctionUrl { return s.urls }

// localStack builds the LocalStack variant (see LocalStack).
func (s *Stack) localStack(p Props) {
	removal := awscdk.RemovalPolicy_DESTROY
	s.existingData()
	s.secrets(removal)
	streaming := s.lambdas(p, removal)
	s.urls = map[string]awslambda.FunctionUrl{}
	for _, name := range s.FunctionNames() {
		if slices.Contains(routes.Workers, name) {
			continue // no route: no URL
		}
		mode := awslambda.InvokeMode_BUFFERED
		if streaming[name] {
			mode = awslambda.InvokeMode_RESPONSE_STREAM
		}
		// Auth NONE, as the model route's URL on AWS: every handler
		// authenticates its caller.
		u := s.Functions[name].AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_NONE, InvokeMode: mode})
		s.urls[name] = u
		awscdk.NewCfnOutput(s.Stack, jsii.String(logicalID(name)+"Url"), &awscdk.CfnOutputProps{
			Value:       u.Url(),
			Description: jsii.String("The function URL of " + name + ": " + routesOf(s.Routes, name)),
		})
	}
	// The embed view is at the embed function's URL; sandboxes would reach
	// the sandbox function's (no sandbox runs: ECS is not in community
	// LocalStack, so a launch fails and the session with it).
	s.Functions["create"].AddEnvironment(jsii.String("RA_PUBLIC_BASE_URL"), origin(s.urls["embed"]), nil)
	cluster := "ra-" + p.Env + "-sandboxes"
	for _, name := range []string{routes.JobWorker, ToolWorker} {
		fn := s.Functions[name]
		fn.AddEnvironment(jsii.String("RA_GATEWAY_URL"), origin(s.urls["sandbox"]), nil)
		fn.AddEnvironment(jsii.String("RA_ECS_CLUSTER"), jsii.String(cluster), nil)
		fn.AddEnvironment(jsii.String("RA_ECS_TASK_DEFINITION"), jsii.String("ra-"+p.Env+"-sandbox"), nil)
		fn.AddEnvironment(jsii.String("RA_ECS_CONTAINER"), jsii.String(SandboxContainer), nil)
		fn.AddEnvironment(jsii.String("RA_ECS_SUBNETS"), jsii.String("subnet-localstack"), nil)
		fn.AddEnvironment(jsii.String("RA_ECS_SECURITY_GROUPS"), jsii.String("sg-localstack"), nil)
	}
	s.grant(sandboxes{})
	// The webhooks function consumes its queue (replays), but reads no
	// stream: the events table is the init hook's, whose stream's ARN the
	// stack cannot know (streamSources is AWS's), so agents' events are not
	// delivered as webhooks as they are written.
	s.eventSources()
	s.sandboxStopped(p, awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:ecs:${AWS::Region}:${AWS::AccountId}:cluster/"+cluster), nil))
	s.jobEvents(p)
	s.modelOutputs()
}

// existingData references the tables, queues and bucket of the environment
// by name: LocalStack's init hook made them (localstack/cmd/bootstrap).
func (s *Stack) existingData() {
	st, set := s.Stack, s.Set
	for _, t := range set.Tables() {
		s.Tables[t.Name] = awsdynamodb.Table_FromTableName(st, jsii.String(s.id(t.Name, "Table")), jsii.String(t.Name))
	}
	for _, q := range set.Queues() {
		for _, name := range []string{q.Name, q.DeadLetterName} {
			s.Queues[name] = awssqs.Queue_FromQueueAttributes(st, jsii.String(s.id(name, "Queue")), &awssqs.QueueAttributes{
				QueueArn: awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:"+name), nil),
				QueueUrl: awscdk.Fn_Sub(jsii.String("http://sqs.${AWS::Region}.localhost.localstack.cloud:4566/${AWS::AccountId}/"+name), nil),
			})
		}
	}
	s.Bucket = awss3.Bucket_FromBucketName(st, jsii.String("Data"), jsii.String(set.Bucket.Name))
}

// origin is a function URL without its trailing slash.
func origin(u awslambda.FunctionUrl) *string {
	parts := awscdk.Fn_Split(jsii.String("/"), u.Url(), nil)
	return awscdk.Fn_Join(jsii.String("/"), &[]*string{awscdk.Fn_Select(jsii.Number(0), parts), awscdk.Fn_Select(jsii.Number(1), parts), awscdk.Fn_Select(jsii.Number(2), parts)})
}

// routesOf lists the route keys function serves.
func routesOf(rs []routes.Route, function string) string {
	var keys []string
	for _, r := range rs {
		if r.Function == function && !slices.Contains(keys, r.Key()) {
			keys = append(keys, r.Key())
		}
	}
	return strings.Join(keys, ", ")
}
