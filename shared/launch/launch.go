// Package launch defines how sandboxes are started and stopped. One interface,
// several backends: process (local: a child process per sandbox) and fargate (an
// ECS task per sandbox). Launching is idempotent per session and generation.
package launch

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// Spec is one sandbox to start.
type Spec struct {
	SessionID  string
	Generation int
	// GatewayURL is where the sandbox reaches the platform (its channel routes).
	GatewayURL string
	// BootstrapCode is the one-time code the sandbox exchanges for its token
	// (never the token: a launcher's environment may be shown, as ECS shows
	// RunTask overrides).
	BootstrapCode string
	// ModelGatewayURL is where it reaches the model route, if not at
	// GatewayURL (on AWS, the model function's own URL).
	ModelGatewayURL string
	// PushURL is the push channel the sandbox connects to; "" none (it
	// polls its inbox only).
	PushURL string
	// TmuxSessionName names the terminal session the agent runs in, if tmux is there.
	TmuxSessionName string
	// Size is the sandbox's CPU, memory and disk (its agent type's resource
	// limits); a zero part is the launcher's default. On Fargate it is the
	// task's size; locally, what the machine can enforce on a process.
	Size tasksize.Size
	// Fallback asks for the launcher's fallback capacity: the retry of a
	// launch that failed (on Fargate, the other capacity provider, Spot or
	// on-demand; locally, simply a second process).
	Fallback bool
	// Pool launches a warm pool sandbox: SessionID is then its pool sandbox
	// id (package pool), and the sandbox waits to be claimed by a session.
	Pool bool
	// Image is the container image the sandbox runs, its agent type's
	// base_image ("": the platform's image). On Fargate the agent is mounted
	// into it from the platform's image; locally the sandbox command is
	// told it (EnvBaseImage) and may run it.
	Image string
	// Isolated cuts the sandbox off from the network: its traffic goes
	// through the egress proxy, which holds it to its egress policy (on
	// Fargate, a security group that reaches the proxy and the platform
	// only; locally, a network namespace of its own).
	Isolated bool
	// Offline says the egress policy of an Isolated sandbox allows nothing:
	// it reaches the platform only, which Env tells it
	// (sandboxwire.EnvNetworkIsolated), since a launcher that cannot cut a
	// sandbox off fails its launch (ErrIsolationUnavailable).
	Offline bool
	// Bare is the last launch of a session whose launches with its
	// workspace failed: the platform's image at the default size (Size and
	// Image are zero), a request of its own.
	Bare bool
}

// Address is where a running sandbox is on the network: its private IP
// address (a Fargate task's, as the task's RUNNING event says), by which
// the egress proxy knows it. Sandbox is its session (or warm pool sandbox)
// and Ref its launcher's reference, which the session must still hold for
// the address to be its (addresses are used again).
type Address struct {
	Addr    netip.Addr
	Sandbox string
	Ref     string
}

// ErrNoAddress: no running sandbox is recorded at an address.
var ErrNoAddress = errors.New("no sandbox at that address")

// ImageFamilyInfix joins the sandbox task definition's family and an
// image's hash in the family of the task definition a Fargate launcher
// registers for a base image: <family>-img-<12 hex digits>.
const ImageFamilyInfix = "-img-"

// EnvBaseImage names, in a local sandbox's environment, the image its agent
// type asks for (Spec.Image): what a sandbox command that runs containers
// runs the agent in.
const EnvBaseImage = "RA_BASE_IMAGE"

// Env returns the environment the sandbox reads its identity from.
func (s Spec) Env() map[string]string {
	id := sandboxwire.EnvSessionID
	if s.Pool {
		id = sandboxwire.EnvPoolSandbox
	}
	env := map[string]string{
		id:                             s.SessionID,
		sandboxwire.EnvGeneration:      strconv.Itoa(s.Generation),
		sandboxwire.EnvGatewayURL:      s.GatewayURL,
		sandboxwire.EnvBootstrapCode:   s.BootstrapCode,
		sandboxwire.EnvTmuxSessionName: s.TmuxSessionName,
	}
	if s.PushURL != "" {
		env[sandboxwire.EnvPushURL] = s.PushURL
	}
	if s.ModelGatewayURL != "" && s.ModelGatewayURL != s.GatewayURL {
		env[sandboxwire.EnvModelGatewayURL] = s.ModelGatewayURL
	}
	if s.Image != "" {
		env[EnvBaseImage] = s.Image
	}
	if s.Isolated && s.Offline {
		env[sandboxwire.EnvNetworkIsolated] = "1"
	}
	return env
}

// ErrIsolationUnavailable is a launch refused because the sandbox's egress
// policy cuts it off from the network and this launcher cannot (locally: no
// network namespaces without root; on AWS: a stack without the egress
// proxy). Launching it anyway would run it open, so it is not retried.
var ErrIsolationUnavailable = errors.New("isolation unavailable")

// Exit reports a sandbox that stopped, as ECS task-state events do.
type Exit struct {
	SessionID  string
	Generation int
	Ref        string
	ExitCode   int
	// Detail is why, as the launcher says it (ECS: the stopped reason and
	// the container's reason); OutOfMemory recognises a memory kill.
	Detail string
}

// OOMReason is how ECS names a container killed for its memory (the
// container's reason, "OutOfMemoryError: Container killed due to memory
// usage"); the process launcher says the same of a sandbox its cgroup's
// memory.max killed.
const OOMReason = "OutOfMemoryError"

// OutOfMemory reports whether an exit's detail says the sandbox was killed
// for its memory.
func OutOfMemory(detail string) bool { return strings.Contains(detail, OOMReason) }

// Launcher starts and stops sandboxes.
type Launcher interface {
	// Launch starts the sandbox of spec and returns its reference. Launching the
	// same session and generation again returns the first reference and starts
	// nothing.
	Launch(ctx context.Context, spec Spec) (ref string, err error)
	// Stop asks the sandbox ref to stop, and stops it for good after grace. Stopping
	// a sandbox that has already stopped is no error.
	Stop(ctx context.Context, ref string, grace time.Duration) error
}
