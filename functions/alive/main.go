// Command alive is the Lambda function of GET /api/remote_agents/{id}/alive.
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
	lambda.Start(httpapi.CORS(sys.Config.AllowedOrigins, "GET", h.Alive))
}
