// Command model is the Lambda function of the model gateway,
// POST /sandbox/{sessionId}/model/{provider}/{proxy+}: sandboxes' model calls,
// forwarded with the platform's credential (keys from the Secrets Manager
// secrets RA_MODEL_SECRET_<PROVIDER> names, read once per cold start; Bedrock
// signed with the function's role), the answer streamed back through a
// function URL with response streaming (invoke mode RESPONSE_STREAM), and
// each call's tokens added to its session's usage.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/model"
)

func main() {
	lambda.Start(wiring.Lambda(model.Build))
}
