//go:build linux

package confine

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ABI returns the Landlock ABI version the kernel offers, or an error when it
// offers none (too old, or disabled).
func ABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, fmt.Errorf("landlock: %w", errno)
	}
	return int(v), nil
}

// Access rights, by the ABI that brought them.
const (
	readAccess  = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	abi1Access  = 1<<13 - 1 // EXECUTE … MAKE_SYM
	deviceWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
)

// rulesetAttr is the ABI 1 ruleset attribute (the kernel takes a prefix of
// the newer structure).
type rulesetAttr struct{ handledAccessFS uint64 }

// pathBeneath is struct landlock_path_beneath_attr, packed as the kernel
// declares it.
type pathBeneath struct {
	allowedAccess uint64
	parentFd      int32
}

// restrict confines this thread (and what it executes) to r.
func restrict(r Rules) error {
	abi, err := ABI()
	if err != nil {
		return err
	}
	handled := uint64(abi1Access)
	truncate := uint64(0)
	if abi >= 2 {
		handled |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		truncate = unix.LANDLOCK_ACCESS_FS_TRUNCATE
		handled |= truncate
	}
	attr := rulesetAttr{handledAccessFS: handled}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0) //nolint:gosec // the kernel's ABI: a pointer to the attribute, for the call only
	if errno != 0 {
		return fmt.Errorf("landlock ruleset: %w", errno)
	}
	defer func() { _ = unix.Close(int(fd)) }()
	add := func(paths []string, access uint64) error {
		for _, p := range paths {
			dir, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.ENOENT) {
				continue // not on this system: nothing to grant
			}
			if err != nil {
				return fmt.Errorf("landlock: open %s: %w", p, err)
			}
			allowed := access
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				// On a file, only the rights that apply to files.
				allowed &= unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | truncate
			}
			rule := pathBeneath{allowedAccess: allowed, parentFd: int32(dir)}                                                                      //nolint:gosec // a file descriptor fits in 32 bits
			_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0) //nolint:gosec // the kernel's ABI, for the call only
			_ = unix.Close(dir)
			if errno != 0 {
				return fmt.Errorf("landlock: grant %s: %w", p, errno)
			}
		}
		return nil
	}
	if err := add(slices.Concat(SystemDirs, r.Read), readAccess); err != nil {
		return err
	}
	if err := add(devices, readAccess|deviceWrite|truncate); err != nil {
		return err
	}
	if err := add(r.Write, handled); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock restrict: %w", errno)
	}
	return nil
}
