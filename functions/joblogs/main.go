// Command joblogs is the Lambda function of GET /internal/jobs/{id}/logs/stream:
// a job's log as Server-Sent Events through a function URL with response
// streaming and IAM authorization, the orchestrator's role only. A stream
// ends before the function's timeout (RA_EVENTS_MAX_SECONDS, default 840);
// the orchestrator reconnects with Last-Event-ID.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/joblogs"
)

func main() {
	lambda.Start(wiring.Lambda(joblogs.Build))
}
