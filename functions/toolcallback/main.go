// Command toolcallback is the Lambda function of the tool callbacks,
// POST /proliferate/{sessionId}/tools/{toolName}: sandbox tokens only.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/toolcallback"
)

func main() {
	lambda.Start(wiring.Lambda(toolcallback.Build))
}
