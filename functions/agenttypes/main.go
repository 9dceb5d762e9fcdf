// Command agenttypes is the Lambda function of the agent type routes:
// POST and GET /api/v1/agent-types, GET /api/v1/agent-types/{id}, GET and PUT
// /api/v1/agent-types/{id}/workspace-config.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/agenttypes"
)

func main() {
	lambda.Start(wiring.Lambda(agenttypes.Build))
}
