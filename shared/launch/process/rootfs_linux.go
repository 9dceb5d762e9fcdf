package process

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// rootfs runs sandboxes in an image's root filesystem (Options.Rootfs):
// each is chrooted into it, with the host's /proc and /dev and its own
// folders bound in at the same paths. The binds are the launcher's: /proc
// and /dev while any sandbox runs, a sandbox's folders while it does.
type rootfs struct {
	dir   string
	mu    sync.Mutex
	users int // sandboxes running in it
}

// shared are bound in while any sandbox runs (recursively: /dev/pts…).
var shared = []string{"/proc", "/dev"}

// enter binds the shared folders (for the first sandbox) and dirs into the
// root filesystem, and returns what undoes it.
func (r *rootfs) enter(dirs ...string) (leave func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bound []string
	undo := func() {
		for i := len(bound) - 1; i >= 0; i-- {
			_ = syscall.Unmount(bound[i], syscall.MNT_DETACH)
		}
	}
	bind := func(src string) error {
		dst := filepath.Join(r.dir, src)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s into the image: %w", src, err)
		}
		bound = append(bound, dst)
		return nil
	}
	if r.users == 0 {
		for _, d := range shared {
			if err := bind(d); err != nil {
				undo()
				return nil, err
			}
		}
	}
	first := len(bound)
	for _, d := range dirs {
		if err := bind(d); err != nil {
			undo()
			return nil, err
		}
	}
	r.users++
	own := bound[first:]
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := len(own) - 1; i >= 0; i-- {
			_ = syscall.Unmount(own[i], syscall.MNT_DETACH)
		}
		if r.users--; r.users == 0 {
			for i := len(shared) - 1; i >= 0; i-- {
				_ = syscall.Unmount(filepath.Join(r.dir, shared[i]), syscall.MNT_DETACH)
			}
		}
	}, nil
}
