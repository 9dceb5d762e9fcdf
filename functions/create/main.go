// Command create is the Lambda function of POST /api/remote_agents/create.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
)

func main() {
	lambda.Start(wiring.Lambda(wiring.Create))
}
