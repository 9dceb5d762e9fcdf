// Package taskdial reaches sandboxes that run as Fargate tasks, for the
// sandbox proxy on AWS (a sandboxproxy.Dialer): at the private address the
// worker recorded for each sandbox's task when it ran (dynamo.Addresses,
// from the task's RUNNING event), over TCP.
package taskdial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Addresses finds where a sandbox runs (dynamo.Addresses).
type Addresses interface {
	// Of returns where sandbox (a session's id, or a warm pool sandbox's)
	// was last recorded running; launch.ErrNoAddress if nowhere.
	Of(ctx context.Context, sandbox string) (launch.Address, error)
}

// DefaultTimeout bounds a dial: a task in the VPC answers at once or not
// at all.
const DefaultTimeout = 5 * time.Second

// Errors of DialSandbox, which the sandbox proxy answers 502 to.
var (
	// ErrNoTask: no task of the sandbox is recorded running, or the one
	// recorded is not the session's current sandbox (an earlier launch's,
	// or one whose running was heard of before its launch was stored).
	ErrNoTask = errors.New("no running task of the sandbox is known")
	// ErrUnreachable: the task does not answer on the port.
	ErrUnreachable = errors.New("the sandbox does not answer on that port")
)

// Dialer dials sandbox tasks.
type Dialer struct {
	Addresses Addresses
	// Timeout bounds each dial; 0: DefaultTimeout.
	Timeout time.Duration
}

// DialSandbox dials sess's sandbox on port: the task of the warm pool
// sandbox it claimed, if it did, else its own; only if that task is the
// one the session holds (SandboxRef), as the egress proxy knows a sandbox
// by its address only while it holds the recorded task
// (egressgrant.Identify). A claim copies the pool sandbox's reference to
// the session in the claim's own write, so the session's is the one to
// compare with either way. Errors are ErrNoTask or ErrUnreachable, or the
// store's.
func (d *Dialer) DialSandbox(ctx context.Context, sess session.Session, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("sandbox %s: port %d is not a port", sess.ID, port)
	}
	id := sess.ID
	if sess.PoolSandbox != "" {
		id = sess.PoolSandbox
	}
	a, err := d.Addresses.Of(ctx, id)
	if errors.Is(err, launch.ErrNoAddress) {
		return nil, fmt.Errorf("sandbox %s: %w", sess.ID, ErrNoTask)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", sess.ID, err)
	}
	if sess.SandboxRef == "" || a.Ref != sess.SandboxRef {
		return nil, fmt.Errorf("sandbox %s: %w", sess.ID, ErrNoTask)
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialer := net.Dialer{Timeout: timeout}
	conn, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Addr, uint16(port)).String())
	if err != nil {
		return nil, &dialError{sandbox: sess.ID, port: port, err: err}
	}
	return conn, nil
}

// dialError is a failed dial: ErrUnreachable, saying which sandbox and
// port but not the task's private address (the proxy may show a dial's
// error to its client); the dial's own error is its cause (Unwrap).
type dialError struct {
	sandbox string
	port    int
	err     error
}

func (e *dialError) Error() string {
	return fmt.Sprintf("sandbox %s, port %d: %s", e.sandbox, e.port, ErrUnreachable)
}

func (e *dialError) Is(target error) bool { return target == ErrUnreachable }

func (e *dialError) Unwrap() error { return e.err }
