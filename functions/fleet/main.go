// Command fleet is the Lambda function of the fleet routes: GET
// /api/remote_agents (an app's agents, app key) and POST
// /api/remote_agents/{id}/kill (app key or session token).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/fleet"
)

func main() {
	lambda.Start(wiring.Lambda(fleet.Build))
}
