package stack

import (
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// Grants is each function's access (package access, which the dev server's tests
// check against every AWS call the code makes; a table's stream is read by
// Lambda for the function's event source, with the function's role); the tool
// worker runs jobworker's code and has its access.
func (s *Stack) Grants() map[string]access.Access {
	out := map[string]access.Access{}
	for _, fn := range s.FunctionNames() {
		a, ok := s.access(fn)
		if !ok {
			panic("no access declared for function " + fn)
		}
		out[fn] = a
	}
	out[ToolWorker] = out[routes.JobWorker]
	return out
}

// indexes are the names of the global secondary indexes of the table named
// name (its full name).
func (s *Stack) indexes(name string) []string {
	var out []string
	for _, t := range s.Set.Tables() {
		if t.Name == name {
			for _, idx := range t.Indexes {
				out = append(out, idx.Name)
			}
		}
	}
	return out
}

// name is a resource's full name in this environment.
func (s *Stack) name(short string) string { return "ra-" + s.Set.Env + "-" + short }

// grant turns each function's access into statements on exactly those
// resources, and gives the model function its secrets and Bedrock models; the
// launchers' ECS statements only where sb has a task (not on LocalStack).
func (s *Stack) grant(sb sandboxes) {
	s.grantModels()
	for fnName, a := range s.Grants() {
		fn := s.Functions[fnName]
		for table, actions := range a.Tables {
			arn := s.Tables[s.name(table)].TableArn()
			resources := []*string{arn}
			if slices.Contains(actions, access.Query) {
				// A query may read the table's indexes (the registry's
				// by_kind lists agent types): each by its ARN, under the table's.
				for _, idx := range s.indexes(s.name(table)) {
					resources = append(resources, jsii.String(*arn+"/index/"+idx))
				}
			}
			limited := actions
			if w, ok := a.WriteKeys[table]; ok {
				// Writes only to the items WriteKeys names; reads as declared.
				var written []string
				limited = slices.DeleteFunc(slices.Clone(actions), func(act string) bool {
					if act == access.PutItem || act == access.UpdateItem || act == access.DeleteItem {
						written = append(written, act)
						return true
					}
					return false
				})
				if len(written) > 0 {
					fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
						Actions:    jsii.Strings(written...),
						Resources:  &[]*string{arn},
						Conditions: leadingKeys(w, nil),
					}))
				}
			}
			if len(limited) == 0 {
				continue
			}
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings(limited...),
				Resources:  &resources,
				Conditions: leadingKeys(a.LeadingKeys[table], a.IndexKeys[table]),
			}))
		}
		for _, table := range a.Streams {
			s.grantStreamRead(fn, table)
		}
		for _, q := range a.Send {
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("sqs:SendMessage"),
				Resources: &[]*string{s.Queues[s.name(q)].QueueArn()},
			}))
		}
		for pattern, actions := range a.Objects {
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings(actions...),
				Resources: &[]*string{s.Bucket.ArnForObjects(jsii.String(pattern))},
			}))
		}
		for _, prefix := range a.List {
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings("s3:ListBucket"),
				Resources:  &[]*string{s.Bucket.BucketArn()},
				Conditions: &map[string]any{"StringLike": map[string]any{"s3:prefix": []string{prefix + "*"}}},
			}))
		}
		if a.Launch && sb.task != nil {
			// RunTask of the sandbox task, and of the task definitions the
			// launcher registers from it for base images (their family's
			// revisions), only in its cluster; StopTask of tasks in that
			// cluster (their ARNs, whose ids ECS picks); PassRole of its two
			// roles, which the image definitions keep. Registering and
			// describing task definitions has no resource of its own (IAM
			// takes "*" only). No DescribeTasks: it would show the tasks'
			// environment.
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings("ecs:RunTask"),
				Resources:  &[]*string{sb.task.TaskDefinitionArn(), s.imageTaskDefinitions()},
				Conditions: &map[string]any{"ArnEquals": map[string]any{"ecs:cluster": sb.cluster.ClusterArn()}},
			}))
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("ecs:DescribeTaskDefinition", "ecs:RegisterTaskDefinition"),
				Resources: jsii.Strings("*"),
			}))
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings("ecs:StopTask"),
				Resources:  &[]*string{s.sandboxTasks()},
				Conditions: &map[string]any{"ArnEquals": map[string]any{"ecs:cluster": sb.cluster.ClusterArn()}},
			}))
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("iam:PassRole"),
				Resources: &[]*string{sb.task.TaskRole().RoleArn(), sb.task.ExecutionRole().RoleArn()},
			}))
		}
	}
}

// listStreams is the one action of access.StreamActions that takes no
// resource ARN: it lists the account's streams, on "*" (as aws-cdk-lib's
// stream grants, and so the stream's event source, have it).
const listStreams = "dynamodb:ListStreams"

// grantStreamRead lets fn read the stream of the table called table (its
// short name): access.StreamActions on the stream's ARN, listStreams on "*".
// A table the stack only references by name (the LocalStack variant's, made
// by the init hook) has no stream ARN to name: nothing is granted, and
// nothing reads it (streamSources is AWS's).
func (s *Stack) grantStreamRead(fn awslambda.Function, table string) {
	arn := s.Tables[s.name(table)].TableStreamArn()
	if arn == nil {
		return
	}
	var read []string
	for _, act := range access.StreamActions {
		if act != listStreams {
			read = append(read, act)
		}
	}
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(read...),
		Resources: &[]*string{arn},
	}))
	if slices.Contains(access.StreamActions, listStreams) {
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(listStreams),
			Resources: jsii.Strings("*"),
		}))
	}
}

// leadingKeys is the condition limiting a table's statement to the items whose
// partition key starts with one of prefixes, and the index partitions whose
// key is one of exact; nil (no condition) for no prefix.
func leadingKeys(prefixes, exact []string) *map[string]any {
	if len(prefixes) == 0 {
		return nil
	}
	patterns := make([]string, 0, len(prefixes)+len(exact))
	for _, p := range prefixes {
		patterns = append(patterns, p+"*")
	}
	patterns = append(patterns, exact...)
	return &map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": patterns}}
}

// sandboxTasks is the ARN pattern of the sandbox cluster's tasks.
// imageTaskDefinitions are the revisions of the task definitions of base
// images (fargate.ImageFamily: <sandbox family>-img-<hash>).
func (s *Stack) imageTaskDefinitions() *string {
	return s.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("ecs"),
		Resource:     jsii.String("task-definition"),
		ResourceName: jsii.String(s.name("sandbox") + launch.ImageFamilyInfix + "*:*"),
		ArnFormat:    awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
}

func (s *Stack) sandboxTasks() *string {
	return s.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("ecs"),
		Resource:     jsii.String("task"),
		ResourceName: jsii.String(s.name("sandboxes") + "/*"),
		ArnFormat:    awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
}

// functionRole is a function's role, with only the writing of its own log
// group to start with (AWSLambdaBasicExecutionRole, CDK's default, would let
// it write to every log group); its grants add the rest.
func (s *Stack) functionRole(name string, logs awslogs.LogGroup) awsiam.Role {
	role := awsiam.NewRole(s.Stack, jsii.String(logicalID(name)+"FunctionRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("Remote Agents " + name + " (" + s.Set.Env + ")"),
	})
	logs.GrantWrite(role)
	return role
}
