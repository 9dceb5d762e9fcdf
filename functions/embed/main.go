// Command embed is the Lambda function of the embed view, GET /embed/{id}.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/system"
)

func main() {
	ctx := context.Background()
	sys, err := system.New(ctx, system.Options{})
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(system.EmbedHandlers(ctx, sys).Page)
}
