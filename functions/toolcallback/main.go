// Command toolcallback is the Lambda function of the tool callbacks,
// POST /proliferate/{sessionId}/tools/{toolName}: sandbox tokens only.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/system"
)

func main() {
	sys, err := system.New(context.Background(), system.Options{})
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(httpapi.Router(system.ToolHandlers(sys).Routes()))
}
