// Command egressproxy is the egress proxy service (package
// egressservice): a container of its own on AWS, run by the stack's
// Fargate service behind an internal load balancer.
package main

import (
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/egressservice"
)

func main() {
	wiring.Service("egress proxy", egressservice.Run)
}
