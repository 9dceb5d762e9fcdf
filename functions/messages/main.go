// Command messages is the Lambda function of what users send an agent:
// POST /api/remote_agents/{id}/messages, /attachments and /env.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/messages"
)

func main() {
	lambda.Start(wiring.Lambda(messages.Build))
}
