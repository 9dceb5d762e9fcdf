// Command sandbox is the Lambda function of the sandbox channel,
// /sandbox/{sessionId}/{spec,status,heartbeat,inbox}: sandbox tokens only.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/sandboxapi"
	"github.com/remote-agents/remote-agents/shared/system"
)

func main() {
	sys, err := system.New(context.Background(), system.Options{})
	if err != nil {
		log.Fatal(err)
	}
	h := &sandboxapi.Handlers{Store: sys.Store, Registry: sys.Registry, Guardrails: sys.Guardrails, Reporter: sys.Reporter, Log: sys.Log}
	lambda.Start(httpapi.Router{
		"GET /sandbox/{sessionId}/spec":       h.Spec,
		"POST /sandbox/{sessionId}/status":    h.Status,
		"POST /sandbox/{sessionId}/heartbeat": h.Heartbeat,
		"GET /sandbox/{sessionId}/inbox":      h.Inbox,
	}.Handle)
}
