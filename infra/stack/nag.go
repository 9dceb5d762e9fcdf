package stack

import (
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/remote-agents/remote-agents/infra/models"
	"github.com/remote-agents/remote-agents/shared/launch"
)

// suppressFindings records on each resource the findings of cdk-nag's
// AwsSolutions pack that the stack accepts, each with its reason and, where
// the rule names what it found (IAM4, IAM5), exactly what is accepted. The
// infra tests run the pack on the synthesized stacks and fail on any other
// finding (TestStackPassesAwsSolutionsChecks). Resources a variant of the
// stack leaves out are skipped.
func (s *Stack) suppressFindings() {
	suppress := func(c constructs.IConstruct, children bool, findings ...*cdknag.NagPackSuppression) {
		if c != nil {
			cdknag.NagSuppressions_AddResourceSuppressions(c, &findings, jsii.Bool(children))
		}
	}
	child := func(id string) constructs.IConstruct { return s.Node().TryFindChild(jsii.String(id)) }

	if s.API != nil {
		suppress(s.API, true, finding("AwsSolutions-APIG4",
			"Every route authenticates in its handler, with the credential it is for: the app's key on create; the session token on "+
				"a session's routes and the embed view; the sandbox token on /sandbox/* and tool callbacks; the one-time code on "+
				"bootstrap (stored hashed, compared in constant time). An API Gateway authorizer would repeat that check for one "+
				"more Lambda call per request."))
	}
	if s.PushAPI != nil {
		suppress(s.PushAPI, true, finding("AwsSolutions-APIG4",
			"$connect authenticates in its handler (the sandbox function) with the sandbox token, the only credential a "+
				"sandbox holds (stored hashed, compared in constant time), and the session it names; $disconnect only "+
				"forgets a connection. An authorizer would repeat that check for one more Lambda call per connect."))
	}
	for _, secret := range s.Secrets {
		suppress(secret, false, finding("AwsSolutions-SMG4",
			"A model provider's API key, issued by the provider (Anthropic, OpenAI, Google, Mistral), none of which has an API "+
				"a rotation function could call; the operator rotates it with put-secret-value (infra/README.md)."))
	}
	if s.Bucket != nil {
		suppress(s.Bucket, false, finding("AwsSolutions-S1",
			"Server access logs record each request's query string, which for the presigned URLs the platform hands out "+
				"(attachment uploads and downloads, sandbox uploads) holds their signature: the log would keep working URLs."))
	}
	suppress(child("Public"), false,
		finding("AwsSolutions-CFR1", "The platform serves apps and sandboxes wherever they run: no country is to be refused."),
		finding("AwsSolutions-CFR2",
			"No web ACL by default (AWS WAF charges per ACL and per request): the API throttles at its stage, every route "+
				"authenticates, and an operator may attach an ACL to the distribution."),
		finding("AwsSolutions-CFR3",
			"CloudFront's standard logs record the query string, and the embed URL carries the session token as ?token= "+
				"(and so may the events stream's): the log would hold live tokens. The API's access log (no query string) records "+
				"API calls; the streaming functions log their own."),
		finding("AwsSolutions-CFR4",
			"The distribution uses CloudFront's default *.cloudfront.net certificate, whose security policy CloudFront fixes "+
				"(TLSv1); a minimum of TLSv1.2 needs a custom domain and its ACM certificate, which the stack does not configure."))
	suppress(child("SandboxTask"), true,
		finding("AwsSolutions-ECS2",
			"The task's environment is the sandboxes' default model and tool user (RA_LLM_PROVIDER, RA_LLM_MODEL, RA_TOOL_USER, RA_SANDBOX_DEDICATED), "+
				"nothing secret: a launch passes its one-time bootstrap code in RunTask's overrides, and provider keys never reach a sandbox."),
		finding("AwsSolutions-IAM5",
			"The execution role's ecr:GetAuthorizationToken, which takes no resource ARN (the image pull itself is on the "+
				"repository's ARN).", "Resource::*"))
	s.suppressEgressFindings(suppress, child)
	s.suppressSandboxProxyFindings(suppress, child)
	if !Prod(s.Set.Env) {
		for _, t := range s.Tables {
			suppress(t, false, finding("AwsSolutions-DDB3",
				"A non-prod environment: its tables hold disposable data and are deleted with the stack; prod has point-in-time recovery."))
		}
	}
	if dlq, ok := s.Queues[s.name(SandboxStoppedDLQ)]; ok {
		suppress(dlq, false, finding("AwsSolutions-SQS3",
			"It is itself a dead-letter queue: the stopped-sandbox rule's target's (EventBridge's DeadLetterConfig, not a redrive policy)."))
	}
	if dlq, ok := s.Queues[s.name(JobEventsDLQ)]; ok {
		suppress(dlq, false, finding("AwsSolutions-SQS3",
			"It is itself a dead-letter queue: the job events rule's target's (EventBridge's DeadLetterConfig, not a redrive policy)."))
	}
	for name, fn := range s.Functions {
		reason, appliesTo := s.wildcards(name)
		suppress(fn.Role(), true, finding("AwsSolutions-IAM5", reason, appliesTo...))
	}
	for _, c := range *s.Node().Children() {
		if strings.HasPrefix(*c.Node().Id(), "Custom::CDKBucketDeployment") {
			suppress(c, true,
				finding("AwsSolutions-L1", "aws-cdk-lib's BucketDeployment handler (it copies data/ into the bucket at deploy): its runtime is aws-cdk-lib's to choose."),
				finding("AwsSolutions-IAM4", "aws-cdk-lib's BucketDeployment handler: aws-cdk-lib makes its role, with this policy for its logs.",
					"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"),
				finding("AwsSolutions-IAM5", "aws-cdk-lib's BucketDeployment handler reads the deploy's asset from CDK's assets bucket and "+
					"writes it to the data bucket, with aws-cdk-lib's grants.",
					"Action::s3:GetObject*", "Action::s3:GetBucket*", "Action::s3:List*", "Action::s3:DeleteObject*", "Action::s3:Abort*",
					"Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*",
					"Resource::<"+s.logicalID(s.Bucket)+".Arn>/*"))
		}
	}
}

// wildcards are the wildcard resources of a function's statements, as cdk-nag
// names them, and why each is one.
func (s *Stack) wildcards(function string) (reason string, appliesTo []string) {
	why := []string{"X-Ray's PutTraceSegments and PutTelemetryRecords take no resource ARN (Resource::*)"}
	appliesTo = []string{"Resource::*"}
	a := s.Grants()[function]
	var patterns []string
	for _, pattern := range slices.Sorted(maps.Keys(a.Objects)) {
		if strings.Contains(pattern, "*") {
			patterns = append(patterns, pattern)
			appliesTo = append(appliesTo, "Resource::<"+s.logicalID(s.Bucket)+".Arn>/"+pattern)
		}
	}
	if len(patterns) > 0 {
		why = append(why, "its objects are those of its shared/access key patterns ("+strings.Join(patterns, ", ")+
			"), whose parts are the ids of sessions and configurations the platform makes")
	}
	if a.Push && s.PushAPI != nil {
		why = append(why, "it posts to the push channel's connections, whose ids API Gateway picks, only on its stage ("+PushStage+"/POST/@connections/*)")
		appliesTo = append(appliesTo, "Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<"+s.logicalID(s.PushAPI)+">/"+PushStage+"/POST/@connections/*")
	}
	if len(a.Streams) > 0 {
		why = append(why, "it reads the streams of "+strings.Join(a.Streams, ", ")+" (its event source), each on its own stream's ARN, "+
			"and dynamodb:ListStreams takes no resource but \"*\"")
	}
	if a.Launch {
		why = append(why, "it stops sandbox tasks, whose ids ECS picks, only in the sandbox cluster (task/"+s.name("sandboxes")+"/*)")
		appliesTo = append(appliesTo, "Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/"+s.name("sandboxes")+"/*")
		why = append(why, "it runs the task definitions it registers for agent types' base images, whose revisions ECS numbers, only of their family (task-definition/"+
			s.name("sandbox")+launch.ImageFamilyInfix+"*:*), and ecs:RegisterTaskDefinition and ecs:DescribeTaskDefinition take no resource but \"*\"")
		appliesTo = append(appliesTo, "Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task-definition/"+s.name("sandbox")+launch.ImageFamilyInfix+"*:*", "Resource::*")
	}
	if function == AppSecretsFunction {
		why = append(why, "it keeps the apps' secrets, named by the apps, only under their prefix ("+s.Set.SecretsPrefix()+
			"*), and ListSecrets takes no resource but \"*\" (the list is filtered by that prefix)")
		appliesTo = append(appliesTo, "Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:"+s.Set.SecretsPrefix()+"*")
	}
	if function == s.Model {
		before := len(appliesTo)
		for _, id := range s.models.Bedrock {
			if b, err := models.ParseBedrock(id); err == nil && b.Profile() {
				appliesTo = append(appliesTo, "Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/"+b.Model)
			}
		}
		if len(appliesTo) > before {
			why = append(why, "a cross-Region inference profile routes each call to its model in any Region of its geography, "+
				"so the model's ARN is in every Region (bedrock:*), allowed only through that profile (bedrock:InferenceProfileArn)")
		}
	}
	return "Wildcards " + function + " needs, and nothing else: " + strings.Join(why, "; ") + ".", appliesTo
}

// logicalID is the logical id of a construct's resource.
func (s *Stack) logicalID(c constructs.IConstruct) string {
	return *s.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

func finding(id, reason string, appliesTo ...string) *cdknag.NagPackSuppression {
	f := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		to := make([]any, len(appliesTo))
		for i, a := range appliesTo {
			to[i] = a
		}
		f.AppliesTo = &to
	}
	return f
}
