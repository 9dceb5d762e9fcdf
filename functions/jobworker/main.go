// Command jobworker is the Lambda function that consumes the jobs queue (session
// starts and stops, ECS task-state events), launching sandboxes on Fargate, and
// the tools queue (long gateway tool calls).
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/jobworker"
	"github.com/remote-agents/remote-agents/shared/launch/fargate"
	"github.com/remote-agents/remote-agents/shared/system"
)

func main() {
	sys, err := system.New(context.Background(), system.Options{})
	if err != nil {
		log.Fatal(err)
	}
	launcher, err := fargate.New(awsconfig.NewECS(sys.AWS), fargate.OptionsFromEnv())
	if err != nil {
		log.Fatal(err)
	}
	gateway := os.Getenv("RA_GATEWAY_URL")
	if gateway == "" {
		gateway = sys.Config.PublicBaseURL
	}
	w := &jobworker.Worker{Store: sys.Store, Launcher: launcher, DLQ: sys.JobsDLQ, GatewayURL: gateway, Tools: sys.Tools, ToolsDLQ: sys.ToolsDLQ, Log: sys.Log}
	lambda.Start(w.Handle)
}
