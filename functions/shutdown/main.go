// Command shutdown is the Lambda function of POST /api/remote_agents/{id}/shutdown.
package main

import (
	"context"
	"log"

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
	h := sessionapi.New(sys.Sessions, sys.Log)
	lambda.Start(httpapi.CORS(sys.Config.AllowedOrigins, "POST", h.Shutdown))
}
