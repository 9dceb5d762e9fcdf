package process

import (
	"os/exec"

	"golang.org/x/sys/unix"

	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// setRlimits bounds the process pid (a sandbox just started, before it runs
// any tool) by size s: RLIMIT_DATA for memory, RLIMIT_FSIZE for disk. A
// limit only ever goes down: one already lower stays.
func setRlimits(pid int, s tasksize.Size) error {
	set := func(resource int, limit uint64) error {
		var old unix.Rlimit
		if err := unix.Prlimit(pid, resource, nil, &old); err != nil {
			return err
		}
		l := unix.Rlimit{Cur: min(limit, old.Cur), Max: min(limit, old.Max)}
		return unix.Prlimit(pid, resource, &l, nil)
	}
	if s.MemoryMiB > 0 {
		if err := set(unix.RLIMIT_DATA, uint64(s.MemoryMiB)<<20); err != nil {
			return err
		}
	}
	if s.DiskGiB > 0 {
		if err := set(unix.RLIMIT_FSIZE, uint64(s.DiskGiB)<<30); err != nil {
			return err
		}
	}
	return nil
}

// writable reports whether the launcher may create entries in dir.
func writable(dir string) bool { return unix.Access(dir, unix.W_OK) == nil }

// start starts the command build makes, in the cgroup dir if not "" (placed
// there as it is created: clone3's CLONE_INTO_CGROUP); a cgroup the kernel
// refuses starts it outside, under its rlimits only.
func start(build func() *exec.Cmd, dir string) (*exec.Cmd, bool, error) {
	if dir != "" {
		if fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			cmd := build()
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
			err := cmd.Start()
			_ = unix.Close(fd)
			if err == nil {
				return cmd, true, nil
			}
		}
	}
	cmd := build()
	return cmd, false, cmd.Start()
}
