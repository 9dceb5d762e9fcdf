package devserver

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/egressgrant"
	"github.com/remote-agents/remote-agents/shared/egressproxy"
	"github.com/remote-agents/remote-agents/shared/launch/process"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/poolservice"
	"github.com/remote-agents/remote-agents/shared/wiring/secretstore"
)

// DefaultProxyPort is the port of the egress proxy in an isolated
// sandbox's network namespace (its HTTP(S)_PROXY), unless the platform
// takes it.
const DefaultProxyPort = 3128

// egressNetwork is how the dev server cuts a sandbox whose egress policy
// is not open off from the network, as Fargate's security group does on
// AWS: a network namespace of its own, where the platform is at its usual
// addresses and the egress proxy at 127.0.0.1:DefaultProxyPort, holding it
// to its session's policy. nil where this machine makes no network
// namespaces (not root): those sandboxes' launches then fail, closed.
func egressNetwork(cfg config.Platform, e *wiring.Env, o Options) *process.Network {
	log := o.Log
	if o.NoEgressIsolation {
		log.Warn("sandboxes are not cut off from the network (NoEgressIsolation): agents whose egress policy is not open will fail to start")
		return nil
	}
	if err := process.CanIsolate(); err != nil {
		log.Warn("sandboxes cannot be cut off from the network here (network namespaces need root): agents whose egress policy is not open will fail to start",
			slog.String("error", err.Error()))
		return nil
	}
	// The platform, and the object store sandboxes upload to by presigned
	// URL (a job's outputs), as an isolated task reaches S3's VPC endpoint
	// on AWS.
	platform := loopbackAddrs(cfg.GatewayURL, cfg.Model.GatewayURL, cfg.Push.URL, cfg.PublicBaseURL, e.BucketOrigin(context.Background()))
	grants := egressgrant.New(egressgrant.Options{Sessions: e.SessionStore(), Pool: e.PoolStore(), Types: poolservice.AgentTypes(e),
		Secrets: secretstore.Service(e), Log: log})
	proxy := egressproxy.New(egressproxy.Options{Lookup: grants.Lookup, Denied: grants.Denied, Platform: platform, Log: log})
	port := DefaultProxyPort
	for slices.Contains(platform, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))) {
		port++
	}
	return &process.Network{
		Platform: platform,
		Proxy:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Serve:    func(l net.Listener, id string) { _ = proxy.Serve(l, id) },
		CA:       proxy.CA,
		Forget:   proxy.Forget,
	}
}

// loopbackAddrs are the host:port of those of urls on 127.0.0.1 (or
// localhost, which is 127.0.0.1 in a sandbox's namespace too), once each.
func loopbackAddrs(urls ...string) []string {
	var out []string
	for _, d := range egressproxy.Destinations(urls...) {
		if port, ok := strings.CutPrefix(d, "localhost:"); ok {
			d = "127.0.0.1:" + port
		}
		if strings.HasPrefix(d, "127.0.0.1:") && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
