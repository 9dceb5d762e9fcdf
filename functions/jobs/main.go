// Command jobs is the Lambda function of the orchestrator's /internal/ routes:
// jobs (POST /internal/jobs, GET /internal/jobs/{id}, its logs and outputs,
// POST /internal/jobs/{id}/cancel) and agent profiles (PUT and GET
// /internal/agents/{id}, GET /internal/agents). IAM authorization, the
// orchestrator's role only.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/jobs"
)

func main() {
	lambda.Start(wiring.Lambda(jobs.Build))
}
