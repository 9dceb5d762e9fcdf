// Command jobworker is the Lambda function that consumes the jobs queue (session
// starts and stops, ECS task-state events), launching sandboxes on Fargate, and
// the tools queue (long gateway tool calls).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/launch/fargate"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/jobworker"
)

func main() {
	lambda.Start(wiring.Lambda(jobworker.Build, wiring.WithLauncher(fargate.FromConfig)))
}
