// Package egressservice builds and runs the egress proxy service of an Env
// (services/egressproxy): on AWS a Fargate service behind an internal load
// balancer, which the sandboxes cut off from the network reach and nothing
// else. It knows each request's sandbox by the address it comes from (the
// worker records each sandbox task's), holds it to its session's egress
// policy, adds its secrets' headers, and reports what it refuses.
package egressservice

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/egressgrant"
	"github.com/remote-agents/remote-agents/shared/egressproxy"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
	"github.com/remote-agents/remote-agents/shared/wiring/secretstore"
)

// Service is the egress proxy service.
type Service struct {
	proxy  *egressproxy.Proxy
	grants *egressgrant.Service
}

// Build builds the service of e.
func Build(ctx context.Context, e *wiring.Env) (*Service, error) {
	master, err := caMaster(ctx, e)
	if err != nil {
		return nil, err
	}
	grants := egressgrant.New(egressgrant.Options{
		Sessions:  e.SessionStore(),
		Pool:      e.PoolStore(),
		Types:     poolservice.AgentTypes(e),
		Secrets:   secretstore.Service(e),
		Addresses: dynamo.NewAddresses(e.DynamoDB(), e.Resources.Idempotency.Name),
		Log:       e.Log,
	})
	cfg := e.Config
	proxy := egressproxy.New(egressproxy.Options{
		Lookup: grants.Lookup,
		Denied: grants.Denied,
		// The platform, and the bucket sandboxes upload to by presigned URL
		// (a job's outputs).
		Platform: egressproxy.Destinations(cfg.GatewayURL, cfg.PublicBaseURL, cfg.Model.GatewayURL, cfg.Push.URL, e.BucketOrigin(ctx)),
		CAMaster: master,
		Log:      e.Log,
	})
	return &Service{proxy: proxy, grants: grants}, nil
}

// Serve serves the sandboxes' connections accepted from l until l is
// closed.
func (s *Service) Serve(l net.Listener) error { return s.proxy.ServeShared(l, s.grants.Identify) }

// Run runs the service of e at its RA_EGRESS_PROXY_ADDR until ctx ends.
func Run(ctx context.Context, e *wiring.Env) error {
	s, err := Build(ctx, e)
	if err != nil {
		return err
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", e.Config.EgressProxy.Addr)
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	e.Log.Info("egress proxy listening", "addr", l.Addr().String())
	return s.Serve(l)
}

// caMaster reads the secret the replicas derive sandboxes' authorities
// from (RA_EGRESS_CA_SECRET); none without one.
func caMaster(ctx context.Context, e *wiring.Env) ([]byte, error) {
	id := e.Config.EgressProxy.CASecret
	if id == "" {
		return nil, nil
	}
	out, err := secretsmanager.NewFromConfig(e.AWS).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return nil, fmt.Errorf("egress proxy: the authorities' secret: %w", err)
	}
	v := aws.ToString(out.SecretString)
	if len(v) < 32 {
		return nil, errors.New("egress proxy: the authorities' secret holds less than 32 characters")
	}
	return []byte(v), nil
}
