// Command messages is the Lambda function of what users send an agent:
// POST /api/remote_agents/{id}/messages, /attachments and /env.
package main

import (
	"context"
	"log"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/sessionapi"
	"github.com/remote-agents/remote-agents/shared/system"
)

func main() {
	sys, err := system.New(context.Background(), system.Options{})
	if err != nil {
		log.Fatal(err)
	}
	var routes []httpapi.Route
	for _, r := range sessionapi.New(sys.Sessions, sys.Log).Routes(sys.Config.AllowedOrigins) {
		for _, suffix := range []string{"/messages", "/attachments", "/env"} {
			if strings.HasSuffix(r.Pattern, suffix) {
				routes = append(routes, r)
			}
		}
	}
	lambda.Start(httpapi.Router(routes))
}
