// Command shutdown is the Lambda function of POST /api/remote_agents/{id}/shutdown.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/shutdown"
)

func main() {
	lambda.Start(wiring.Lambda(shutdown.Build))
}
