// Command embed is the Lambda function of the embed view, GET /embed/{id}.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/embed"
)

func main() {
	lambda.Start(wiring.Lambda(embed.Build))
}
