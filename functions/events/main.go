// Command events is the Lambda function of GET /api/remote_agents/{id}/events:
// Server-Sent Events through a function URL with response streaming (invoke mode
// RESPONSE_STREAM). A stream ends before the function's timeout
// (RA_EVENTS_MAX_SECONDS, default 840); the client reconnects with Last-Event-ID.
package main

import (
	"context"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/remote-agents/remote-agents/shared/eventsapi"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/system"
)

func main() {
	sys, err := system.New(context.Background(), system.Options{})
	if err != nil {
		log.Fatal(err)
	}
	maxSeconds := 840
	if v := os.Getenv("RA_EVENTS_MAX_SECONDS"); v != "" {
		if maxSeconds, err = strconv.Atoi(v); err != nil || maxSeconds <= 0 {
			log.Fatal("RA_EVENTS_MAX_SECONDS is not a number of seconds")
		}
	}
	h := system.EventsHandlers(sys, time.Duration(maxSeconds)*time.Second)
	stream := httpapi.CORSStream(sys.Config.AllowedOrigins, "GET", h.Events)
	lambda.Start(httpapi.FunctionURLStream(http.MethodGet, eventsapi.Pattern, stream))
}
