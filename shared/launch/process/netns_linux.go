package process

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// netns is a sandbox's own network namespace: a loopback interface and
// nothing else, so nothing in it reaches any address but the listeners the
// launcher put there. It lives while a process is in it or the launcher
// holds it (f).
type netns struct {
	f *os.File
}

// newNetns makes a network namespace with its loopback up and a listener
// at each of addrs (loopback addresses) in it. It needs CAP_SYS_ADMIN.
func newNetns(addrs []string) (*netns, []net.Listener, error) {
	type result struct {
		ns  *netns
		ls  []net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The namespace is entered on this thread alone; if the thread cannot
		// go back to the launcher's, it ends with this goroutine (locked).
		runtime.LockOSThread()
		ns, ls, back, err := inNewNetns(addrs)
		if back {
			runtime.UnlockOSThread()
		}
		done <- result{ns, ls, err}
	}()
	r := <-done
	return r.ns, r.ls, r.err
}

// inNewNetns runs on a locked thread: enters a new network namespace, sets
// it up, and goes back (back: it did).
func inNewNetns(addrs []string) (*netns, []net.Listener, bool, error) {
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, nil, true, fmt.Errorf("network namespace: %w", err)
	}
	defer func() { _ = orig.Close() }()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, nil, true, fmt.Errorf("network namespace (needs CAP_SYS_ADMIN): %w", err)
	}
	var ls []net.Listener
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err == nil {
		err = loopbackUp()
	}
	for _, a := range addrs {
		if err != nil {
			break
		}
		var l net.Listener
		if l, err = net.Listen("tcp", a); err == nil {
			ls = append(ls, l)
		}
	}
	if backErr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); backErr != nil {
		err = errors.Join(err, fmt.Errorf("back to the launcher's network namespace: %w", backErr))
		closeAll(ls)
		if ns != nil {
			_ = ns.Close()
		}
		return nil, nil, false, err
	}
	if err != nil {
		closeAll(ls)
		if ns != nil {
			_ = ns.Close()
		}
		return nil, nil, true, fmt.Errorf("network namespace: %w", err)
	}
	return &netns{f: ns}, ls, true, nil
}

// loopbackUp brings up the loopback interface of the thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// run calls start on a thread in n: what start starts is in n.
func (n *netns) run(start func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer func() { _ = orig.Close() }()
		if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the sandbox's network namespace: %w", err)
			return
		}
		err = start()
		if backErr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); backErr != nil {
			// Stay locked: the thread ends with the goroutine.
			errc <- errors.Join(err, backErr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

func (n *netns) close() { _ = n.f.Close() }

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// CanIsolate reports whether this process can cut sandboxes off from the
// network (Network): nil if it can make a network namespace.
func CanIsolate() error {
	ns, _, err := newNetns(nil)
	if err != nil {
		return err
	}
	ns.close()
	return nil
}
