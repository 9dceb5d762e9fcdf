// Command sandbox is the Lambda function of the sandbox channel,
// /sandbox/{sessionId}/{bootstrap,spec,status,heartbeat,inbox,events,uploads},
// and the push channel's WebSocket $connect and $disconnect: sandbox tokens only.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/sandbox"
)

func main() {
	lambda.Start(wiring.Lambda(sandbox.Build))
}
