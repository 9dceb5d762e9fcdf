package httpapi

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// SocketRequest and SocketResponse are API Gateway's WebSocket API events
// ($connect, $disconnect): the push channel's.
type (
	SocketRequest  = events.APIGatewayWebsocketProxyRequest
	SocketResponse = events.APIGatewayProxyResponse
)

// SocketHandler serves a WebSocket API's routes, by the request's route key.
type SocketHandler func(ctx context.Context, req SocketRequest) (SocketResponse, error)

// SocketJSON is a WebSocket route's answer with v as its JSON body ($connect
// refuses a connection with any status but 200).
func SocketJSON(status int, v any) SocketResponse {
	res := JSON(status, v)
	return SocketResponse{StatusCode: res.StatusCode, Headers: res.Headers, Body: res.Body}
}

// SocketError is the error envelope for err, as a WebSocket route's answer.
func SocketError(ctx context.Context, err error) SocketResponse {
	res := Error(ctx, nil, err)
	return SocketResponse{StatusCode: res.StatusCode, Headers: res.Headers, Body: res.Body}
}

// WithSocket returns one Lambda handler for a function that serves both HTTP
// routes (router) and WebSocket routes (socket): a WebSocket event names its
// connection (requestContext.connectionId), an HTTP API event does not.
func WithSocket(router Handler, socket SocketHandler) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			RequestContext struct {
				ConnectionID string `json:"connectionId"`
			} `json:"requestContext"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("decode event: %w", err)
		}
		if probe.RequestContext.ConnectionID != "" {
			var req SocketRequest
			if err := json.Unmarshal(raw, &req); err != nil {
				return nil, fmt.Errorf("decode WebSocket event: %w", err)
			}
			return socket(ctx, req)
		}
		var req Request
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("decode HTTP event: %w", err)
		}
		return router(ctx, req)
	}
}
