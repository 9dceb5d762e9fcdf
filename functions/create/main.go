// Command create is the Lambda function of POST /api/remote_agents/create.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/create"
)

func main() {
	lambda.Start(wiring.Lambda(create.Build))
}
