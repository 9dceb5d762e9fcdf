// Command alive is the Lambda function of GET /api/remote_agents/{id}/alive.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/alive"
)

func main() {
	lambda.Start(wiring.Lambda(alive.Build))
}
