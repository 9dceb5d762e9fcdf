package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// Function is one Lambda function, built: the routes it serves, or the queue
// batches it handles.
type Function struct {
	Name string
	// Routes are its HTTP routes, as package routes assigns them.
	Routes []httpapi.Route
	// Socket, if set, serves the push channel's WebSocket routes
	// (routes.Sockets) besides Routes.
	Socket httpapi.SocketHandler
	// Worker handles SQS batches (jobworker, webhooks).
	Worker func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	// Changes, if set, handles batches of a DynamoDB stream besides
	// Worker's SQS batches (webhooks: the events table's).
	Changes func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

// Builder builds one function in an Env.
type Builder func(context.Context, *Env) (Function, error)

// Handler is what lambda.Start takes for f: a function URL stream for its
// streaming route, a router over its routes (which also serves them through a
// function URL: httpapi.Router), or its queue handler.
func (f Function) Handler() any {
	switch {
	case f.Worker != nil && f.Changes != nil:
		return f.batches
	case f.Worker != nil:
		return f.Worker
	case f.Socket != nil:
		return httpapi.WithSocket(httpapi.Router(f.Routes), f.Socket)
	case len(f.Routes) == 1 && f.Routes[0].Stream != nil:
		return httpapi.FunctionURLStream(f.Routes[0].Method, f.Routes[0].Pattern, f.Routes[0].Stream)
	default:
		return httpapi.Router(f.Routes)
	}
}

// batches hands a batch to Worker or Changes by where its records come
// from (their eventSource: "aws:sqs", "aws:dynamodb").
func (f Function) batches(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("function %s: a batch that is not JSON: %w", f.Name, err)
	}
	if len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:dynamodb" {
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("function %s: stream batch: %w", f.Name, err)
		}
		return f.Changes(ctx, ev)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("function %s: queue batch: %w", f.Name, err)
	}
	return f.Worker(ctx, ev)
}

// Option adjusts the Env a Lambda function is built in.
type Option func(*Env) error

// WithLauncher starts sandboxes with the launcher newLauncher builds from the
// AWS and Fargate configuration (fargate.FromConfig): only jobworker launches,
// so only its binary links a launcher.
func WithLauncher(newLauncher func(aws.Config, config.Fargate) (launch.Launcher, error)) Option {
	return func(e *Env) error {
		l, err := newLauncher(e.AWS, e.Config.Fargate)
		e.Launcher = l
		return err
	}
}

// Lambda builds a function from the process's environment at cold start and
// returns what lambda.Start takes; it exits the process if it cannot.
func Lambda(build Builder, opts ...Option) any {
	ctx := context.Background()
	e, err := FromEnvironment(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range opts {
		if err := o(e); err != nil {
			log.Fatal(err)
		}
	}
	f, err := build(ctx, e)
	if err != nil {
		log.Fatal(err)
	}
	return f.Handler()
}

// Pick returns function name serving the routes of from that package routes
// gives it, and fails unless every one of them has a handler in from and
// every route of from is in the table (a handler cannot serve a path the table,
// and so API Gateway and the document, lack).
func Pick(name string, from []httpapi.Route) (Function, error) {
	inTable := map[string]bool{}
	for _, r := range routes.All() {
		inTable[r.Key()] = true
	}
	byKey := make(map[string]httpapi.Route, len(from))
	for _, r := range from {
		if !inTable[r.Key()] {
			return Function{}, fmt.Errorf("function %s: handler route %s is not in the route table", name, r.Key())
		}
		byKey[r.Key()] = r
	}
	f := Function{Name: name}
	for _, r := range routes.All() {
		if r.Function != name {
			continue
		}
		h, ok := byKey[r.Key()]
		if !ok {
			return Function{}, fmt.Errorf("function %s has no handler for %s", name, r.Key())
		}
		f.Routes = append(f.Routes, h)
	}
	if len(f.Routes) == 0 {
		return Function{}, fmt.Errorf("function %s serves no route", name)
	}
	return f, nil
}
