package process

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// isolation is a sandbox cut off from the network (Network): its
// namespace, the listeners the launcher serves in it, and what its
// environment says of them.
type isolation struct {
	ns     *netns
	ls     []net.Listener
	env    []string
	dir    string // its certificates, readable by its tools
	id     string
	forget func(string)
	once   sync.Once
}

// isolate cuts spec's sandbox off, its network folder at netDir.
func (l *Launcher) isolate(spec launch.Spec, netDir string) (*isolation, error) {
	n := l.o.Network
	if n == nil {
		return nil, fmt.Errorf("%w: this launcher cannot cut a sandbox off from the network, which its egress policy asks for: run the launcher as root (it makes a network namespace per sandbox), or give the agent type egress {\"mode\": \"open\"}", launch.ErrIsolationUnavailable)
	}
	iso := &isolation{id: spec.SessionID, forget: n.Forget, dir: netDir}
	iso.env = sandboxwire.ProxyEnv("http://" + n.Proxy)
	if n.CA != nil {
		ca, err := n.CA(spec.SessionID)
		if err != nil {
			return nil, err
		}
		root := ""
		if l.rootfs != nil {
			root = l.rootfs.dir
		}
		system, err := os.ReadFile(filepath.Join(root, SystemRoots))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("the system's certificates: %w", err)
		}
		if err := os.MkdirAll(netDir, 0o755); err != nil {
			return nil, err
		}
		bundle, caFile := filepath.Join(netDir, sandboxwire.TrustBundleFile), filepath.Join(netDir, sandboxwire.TrustCAFile)
		if err := os.WriteFile(bundle, append(append(system, '\n'), ca...), 0o644); err != nil { //nolint:gosec // certificates, for the sandbox's tools to read
			return nil, err
		}
		if err := os.WriteFile(caFile, ca, 0o644); err != nil { //nolint:gosec // a certificate
			return nil, err
		}
		iso.env = append(iso.env, sandboxwire.TrustEnv(bundle, caFile)...)
	}
	ns, ls, err := newNetns(append(slices.Clone(n.Platform), n.Proxy))
	if err != nil {
		return nil, err
	}
	iso.ns, iso.ls = ns, ls
	for i, addr := range n.Platform {
		go forward(ls[i], addr)
	}
	go n.Serve(ls[len(ls)-1], spec.SessionID)
	return iso, nil
}

// close closes what iso holds, once its sandbox is gone (nil: nothing).
func (iso *isolation) close() {
	if iso == nil {
		return
	}
	iso.once.Do(func() {
		closeAll(iso.ls)
		iso.ns.close()
		if iso.forget != nil {
			iso.forget(iso.id)
		}
	})
}

// forward hands each connection accepted from l to addr, outside the
// sandbox's namespace, until l is closed.
func forward(l net.Listener, addr string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			out, err := net.Dial("tcp", addr)
			if err != nil {
				_ = c.Close()
				return
			}
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(out, c)
				_ = out.(*net.TCPConn).CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(c, out)
			_ = c.(*net.TCPConn).CloseWrite()
			<-done
			_ = c.Close()
			_ = out.Close()
		}()
	}
}
