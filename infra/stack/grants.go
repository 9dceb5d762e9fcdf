package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/remote-agents/remote-agents/shared/routes"
)

// Access is what one function may do to the data: per table, the DynamoDB
// actions; per queue, whether it sends; per bucket prefix, the S3 actions. It is
// written from the code each function runs (the stores and services it builds),
// and nothing else is granted.
type Access struct {
	Tables  map[string][]string // table (resources.Set field name) → actions
	Send    []string            // queues (by resources name) it sends to
	Objects map[string][]string // key pattern → actions (s3:GetObject, s3:PutObject)
	List    []string            // key prefixes it lists (s3:ListBucket)
	Launch  bool                // runs and stops sandbox tasks
}

const (
	get    = "dynamodb:GetItem"
	put    = "dynamodb:PutItem"
	update = "dynamodb:UpdateItem"
	query  = "dynamodb:Query"
	s3Get  = "s3:GetObject"
	s3Put  = "s3:PutObject"
)

// guardrails is the object every function that checks the guardrails reads.
var guardrails = guardrailsPrefix + guardrailsFile

// Grants is each function's access, from the code it runs.
func (s *Stack) Grants() map[string]Access {
	set := s.Set
	jobs, tools := set.JobsQueue, set.ToolsQueue
	worker := Access{
		// session.start/stop, task.state: sessions; tool jobs: records, effects.
		Tables: map[string][]string{
			set.Sessions.Name:    {get, update},
			set.Events.Name:      {put},
			set.Idempotency.Name: {get, update},
			set.Registry.Name:    {get, update},
			set.Jobs.Name:        {put},
		},
		Send:    []string{jobs.DeadLetterName, tools.DeadLetterName},
		Objects: map[string][]string{"sessions/*/tools/*": {s3Get}, "snapshots/*": {s3Put}},
		List:    []string{"sessions/"},
		Launch:  true,
	}
	return map[string]Access{
		"create": {
			Tables: map[string][]string{
				set.Sessions.Name:    {get, put, update},
				set.Idempotency.Name: {get, put},
				set.Registry.Name:    {get},
			},
			Send:    []string{jobs.Name},
			Objects: map[string][]string{guardrails: {s3Get}},
		},
		"alive": {
			Tables:  map[string][]string{set.Sessions.Name: {get, update}},
			Send:    []string{jobs.Name},
			Objects: map[string][]string{guardrails: {s3Get}},
		},
		"shutdown": {
			Tables: map[string][]string{set.Sessions.Name: {get, update}},
			Send:   []string{jobs.Name},
		},
		"messages": {
			Tables: map[string][]string{
				set.Sessions.Name:    {get, update},
				set.Events.Name:      {put},
				set.Idempotency.Name: {get, put},
			},
			// env values it stores; attachments it presigns uploads of.
			Objects: map[string][]string{"sessions/*/env/*": {s3Put}, "sessions/*/attachments/*": {s3Put}},
		},
		"events": {
			Tables: map[string][]string{set.Sessions.Name: {get}, set.Events.Name: {query}},
		},
		"embed": {
			Tables: map[string][]string{set.Sessions.Name: {get}},
		},
		"sandbox": {
			Tables: map[string][]string{
				set.Sessions.Name: {get, update},
				set.Events.Name:   {put, query},
				set.Registry.Name: {get},
			},
			// The guardrails; env values; presigned downloads of attachments and
			// uploads of tool files.
			Objects: map[string][]string{
				guardrails:                 {s3Get},
				"sessions/*/env/*":         {s3Get},
				"sessions/*/attachments/*": {s3Get},
				"sessions/*/tools/*":       {s3Put},
			},
		},
		"toolcallback": {
			Tables: map[string][]string{
				set.Sessions.Name:    {get, update},
				set.Events.Name:      {put},
				set.Idempotency.Name: {get, put, update},
				set.Registry.Name:    {get, update},
				set.Jobs.Name:        {put},
			},
			Send:    []string{tools.Name},
			Objects: map[string][]string{"sessions/*/tools/*": {s3Get}, "snapshots/*": {s3Put}},
			List:    []string{"sessions/"},
		},
		routes.JobWorker: worker,
		ToolWorker:       worker,
	}
}

// grant turns each function's Access into statements on exactly those resources.
func (s *Stack) grant(sb sandboxes) {
	for name, a := range s.Grants() {
		fn := s.Functions[name]
		for tableName, actions := range a.Tables {
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings(actions...),
				Resources: &[]*string{s.Tables[tableName].TableArn()},
			}))
		}
		for _, q := range a.Send {
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("sqs:SendMessage"),
				Resources: &[]*string{s.Queues[q].QueueArn()},
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
		if a.Launch {
			// RunTask of the sandbox task only, in its cluster; StopTask of tasks in
			// that cluster; PassRole of its two roles. No DescribeTasks: it would
			// show the tasks' environment.
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings("ecs:RunTask"),
				Resources:  &[]*string{sb.task.TaskDefinitionArn()},
				Conditions: &map[string]any{"ArnEquals": map[string]any{"ecs:cluster": sb.cluster.ClusterArn()}},
			}))
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings("ecs:StopTask"),
				Resources:  jsii.Strings("*"),
				Conditions: &map[string]any{"ArnEquals": map[string]any{"ecs:cluster": sb.cluster.ClusterArn()}},
			}))
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("iam:PassRole"),
				Resources: &[]*string{sb.task.TaskRole().RoleArn(), sb.task.ExecutionRole().RoleArn()},
			}))
		}
	}
}
