// Command events is the Lambda function of GET /api/remote_agents/{id}/events:
// Server-Sent Events through a function URL with response streaming (invoke mode
// RESPONSE_STREAM). A stream ends before the function's timeout
// (RA_EVENTS_MAX_SECONDS, default 840); the client reconnects with Last-Event-ID.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/events"
)

func main() {
	lambda.Start(wiring.Lambda(events.Build))
}
