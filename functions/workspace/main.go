// Command workspace is the Lambda function of the workspace tools apps run
// in their agent's sandbox: POST /api/remote_agents/{id}/workspace/tools/{tool}.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/workspace"
)

func main() {
	lambda.Start(wiring.Lambda(workspace.Build))
}
