// Command sandboxproxy is the sandbox proxy service (package
// sandboxproxyservice): a container of its own on AWS, run by the stack's
// Fargate service behind an internet-facing load balancer, the way in to
// sandboxes' envd (E2B_SANDBOX_URL).
package main

import (
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/sandboxproxyservice"
)

func main() {
	wiring.Service("sandbox proxy", sandboxproxyservice.Run)
}
