// Command webhooks is the Lambda function that delivers the apps' webhooks:
// it reads the events table's stream and consumes the webhooks queue.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/webhooks"
)

func main() {
	lambda.Start(wiring.Lambda(webhooks.Build))
}
