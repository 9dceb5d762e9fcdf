//go:build linux

package process

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// descendants returns the pids of every process below pid (children,
// their children…), read from /proc: the processes a sandbox started in
// process groups of their own (its tools' commands), which a signal to the
// sandbox's process group does not reach.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		rest := string(stat)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			continue
		}
		parent, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		children[parent] = append(children[parent], child)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// freezeTree stops pid's descendants (SIGSTOP), so that none forks or
// leaves while the tree is killed, and returns them.
func freezeTree(pid int) []int {
	tree := descendants(pid)
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	// A process forked between the read and the signals is found now.
	for _, p := range descendants(pid) {
		_ = syscall.Kill(p, syscall.SIGSTOP)
		tree = append(tree, p)
	}
	return tree
}

// killTree kills the processes freezeTree returned, and their process groups.
func killTree(tree []int) {
	for _, p := range tree {
		if pgid, err := syscall.Getpgid(p); err == nil && pgid > 1 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// groupsBelow returns the process groups of pid's descendants other than
// pid's own.
func groupsBelow(pid int) []int {
	var out []int
	for _, p := range descendants(pid) {
		if g, err := syscall.Getpgid(p); err == nil && g > 1 && g != pid && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// awaitExit waits, at most within, for process pid (not a child: a daemon
// the sandbox left) to end.
func awaitExit(pid int, within time.Duration) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already, or not to be waited for
	}
	defer func() { _ = unix.Close(fd) }()
	// A pidfd reads as ready once its process has ended.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}} //nolint:gosec // a descriptor fits in int32
	for end := time.Now().Add(within); ; {
		left := time.Until(end)
		if left <= 0 {
			return
		}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != unix.EINTR {
			return
		}
	}
}
