// Command e2b is the Lambda function of the sandbox API: E2B's control
// plane under /e2b (create, connect, list, info, timeout, pause, kill).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/e2b"
)

func main() {
	lambda.Start(wiring.Lambda(e2b.Build))
}
