// Package apigwpush pushes frames to sandboxes over the API Gateway WebSocket
// API's @connections (the API Gateway Management API): it implements
// session.Notifier. Locally the dev server serves the same @connections
// routes, so the same client, pointed at it, delivers to its sockets.
package apigwpush

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigatewaymanagementapi"
	"github.com/aws/aws-sdk-go-v2/service/apigatewaymanagementapi/types"

	"github.com/remote-agents/remote-agents/shared/session"
)

var _ session.Notifier = (*Notifier)(nil)

// API is the part of the Management API client Notifier calls.
type API interface {
	PostToConnection(ctx context.Context, in *apigatewaymanagementapi.PostToConnectionInput, optFns ...func(*apigatewaymanagementapi.Options)) (*apigatewaymanagementapi.PostToConnectionOutput, error)
}

// Notifier posts to connections.
type Notifier struct {
	api API
}

// New returns a Notifier over api.
func New(api API) *Notifier { return &Notifier{api: api} }

// NewClient returns the Management API client of the WebSocket API stage at
// endpoint (https://{api-id}.execute-api.{region}.amazonaws.com/{stage}, or
// the dev server's URL).
func NewClient(cfg aws.Config, endpoint string) *apigatewaymanagementapi.Client {
	return apigatewaymanagementapi.NewFromConfig(cfg, func(o *apigatewaymanagementapi.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	})
}

// Push posts frame to connection connectionID; session.ErrGone when API
// Gateway answers GoneException (the connection is closed, or never was).
func (n *Notifier) Push(ctx context.Context, connectionID string, frame []byte) error {
	_, err := n.api.PostToConnection(ctx, &apigatewaymanagementapi.PostToConnectionInput{ConnectionId: aws.String(connectionID), Data: frame})
	var gone *types.GoneException
	if errors.As(err, &gone) {
		return fmt.Errorf("post to connection %s: %w", connectionID, session.ErrGone)
	}
	if err != nil {
		return fmt.Errorf("post to connection %s: %w", connectionID, err)
	}
	return nil
}
