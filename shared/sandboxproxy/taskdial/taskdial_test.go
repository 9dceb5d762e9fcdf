package taskdial_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/sandboxproxy"
	"github.com/remote-agents/remote-agents/shared/sandboxproxy/taskdial"
	"github.com/remote-agents/remote-agents/shared/session"
)

var _ sandboxproxy.Dialer = (*taskdial.Dialer)(nil)

// addresses is a taskdial.Addresses of fixed records.
type addresses struct {
	of  map[string]launch.Address
	err error
	// asked is the sandbox Of was last asked for.
	asked string
}

func (a *addresses) Of(_ context.Context, sandbox string) (launch.Address, error) {
	a.asked = sandbox
	if a.err != nil {
		return launch.Address{}, a.err
	}
	r, ok := a.of[sandbox]
	if !ok {
		return launch.Address{}, launch.ErrNoAddress
	}
	return r, nil
}

// echo listens on loopback, as a sandbox task's envd, and answers each
// connection with what it reads; it returns its port.
func echo(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

func TestDialSandbox(t *testing.T) {
	t.Parallel()
	loopback := netip.MustParseAddr("127.0.0.1")
	port := echo(t)
	book := map[string]launch.Address{
		"s1":     {Addr: loopback, Sandbox: "s1", Ref: "arn:task/1"},
		"pool-1": {Addr: loopback, Sandbox: "pool-1", Ref: "arn:task/p1"},
		// A session resumed since: its record is still the earlier task's.
		"s2": {Addr: loopback, Sandbox: "s2", Ref: "arn:task/2a"},
	}
	tests := []struct {
		name string
		sess session.Session
		port int
		// asked is the sandbox whose address is read.
		asked string
		want  error // nil: the dial reaches the echo
	}{
		{name: "its own task", sess: sess("s1", "", "arn:task/1"), port: port, asked: "s1"},
		{name: "the warm pool sandbox it claimed", sess: sess("s3", "pool-1", "arn:task/p1"), port: port, asked: "pool-1"},
		{name: "an earlier task's record", sess: sess("s2", "", "arn:task/2b"), port: port, asked: "s2", want: taskdial.ErrNoTask},
		{name: "no reference yet", sess: sess("s1", "", ""), port: port, asked: "s1", want: taskdial.ErrNoTask},
		{name: "a pool sandbox's record, the session holding another task", sess: sess("s3", "pool-1", "arn:task/other"), port: port, asked: "pool-1", want: taskdial.ErrNoTask},
		{name: "no record", sess: sess("s4", "", "arn:task/4"), port: port, asked: "s4", want: taskdial.ErrNoTask},
		{name: "no one listening", sess: sess("s1", "", "arn:task/1"), port: freePort(t), asked: "s1", want: taskdial.ErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := &addresses{of: book}
			d := &taskdial.Dialer{Addresses: a, Timeout: time.Second}
			conn, err := d.DialSandbox(t.Context(), tt.sess, tt.port)
			if a.asked != tt.asked {
				t.Errorf("read the address of %q, want %q", a.asked, tt.asked)
			}
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("dial: %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			if _, err := conn.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4)
			if _, err := io.ReadFull(conn, got); err != nil || string(got) != "ping" {
				t.Errorf("read %q, %v", got, err)
			}
		})
	}
}

// A failed dial says which sandbox and port, never the task's private
// address (the proxy may show it to its client); its cause is kept.
func TestDialErrorHidesTheAddress(t *testing.T) {
	t.Parallel()
	a := &addresses{of: map[string]launch.Address{"s1": {Addr: netip.MustParseAddr("127.0.0.1"), Sandbox: "s1", Ref: "r"}}}
	_, err := (&taskdial.Dialer{Addresses: a}).DialSandbox(t.Context(), sess("s1", "", "r"), freePort(t))
	var op *net.OpError
	if !errors.Is(err, taskdial.ErrUnreachable) || !errors.As(err, &op) {
		t.Fatalf("dial: %v (%T)", err, err)
	}
	if msg := err.Error(); msg == "" || strings.Contains(msg, "127.0.0.1") {
		t.Errorf("the error says %q", msg)
	}
}

// The store's failure is the dial's, not ErrNoTask; a port that is no
// port is refused before anything is read.
func TestDialSandboxRefuses(t *testing.T) {
	t.Parallel()
	broken := errors.New("throttled")
	d := &taskdial.Dialer{Addresses: &addresses{err: broken}}
	if _, err := d.DialSandbox(t.Context(), sess("s1", "", "r"), 49983); !errors.Is(err, broken) || errors.Is(err, taskdial.ErrNoTask) {
		t.Errorf("store failing: %v", err)
	}
	a := &addresses{}
	for _, port := range []int{0, -1, 65536} {
		if _, err := (&taskdial.Dialer{Addresses: a}).DialSandbox(t.Context(), sess("s1", "", "r"), port); err == nil {
			t.Errorf("port %d dialled", port)
		}
	}
	if a.asked != "" {
		t.Errorf("read the address of %q for no port", a.asked)
	}
}

func sess(id, pool, ref string) session.Session {
	return session.Session{ID: id, Launch: session.Launch{PoolSandbox: pool, SandboxRef: ref}}
}
