package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// A local sandbox's size (launch.Spec.Size) is held as far as one machine
// can hold it for one process tree:
//
//   - memory: RLIMIT_DATA of the sandbox process, which every process it
//     starts inherits (a bound per process, not for the tree), and, in a
//     cgroup v2 the launcher may write, memory.max for the tree;
//   - disk: RLIMIT_FSIZE, the largest file any of its processes may write (a
//     bound per file, not for the workspace);
//   - CPU: GOMAXPROCS in its environment (the agent's own parallelism), and,
//     in a writable cgroup v2, cpu.max for the tree.
//
// Where the machine allows no cgroup (cgroup v1, a read-only or undelegated
// hierarchy) the rlimits are what holds.

// cgroupRoot is where the unified (v2) hierarchy is mounted.
const cgroupRoot = "/sys/fs/cgroup"

// detectCgroup returns the cgroup v2 directory the launcher may create its
// sandboxes' cgroups in: dir if set, else the launcher's own cgroup; "" when
// the machine has no cgroup v2 there or it is not writable.
func detectCgroup(dir string) string {
	if dir == "" {
		raw, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			return ""
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
			if rest, ok := strings.CutPrefix(line, "0::"); ok {
				dir = filepath.Join(cgroupRoot, rest)
			}
		}
	}
	if dir == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.controllers")); err != nil {
		return "" // not a cgroup v2 directory (cgroup v1, or none mounted)
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err != nil ||
		(!strings.Contains(string(raw), "memory") && !strings.Contains(string(raw), "cpu")) {
		return "" // its children get no memory or cpu controller
	}
	if !writable(dir) {
		return ""
	}
	return dir
}

// cgroupFiles are the controller files a sandbox's cgroup gets for size s:
// memory.max in bytes, cpu.max as "<quota> <period>" microseconds.
func cgroupFiles(s tasksize.Size) map[string]string {
	files := map[string]string{}
	if s.MemoryMiB > 0 {
		files["memory.max"] = strconv.FormatInt(int64(s.MemoryMiB)<<20, 10)
	}
	if s.CPUUnits > 0 {
		const period = 100000
		files["cpu.max"] = fmt.Sprintf("%d %d", s.CPUUnits*period/1024, period)
	}
	return files
}

// makeCgroup creates the cgroup name under parent with the limits of s and
// returns its path; nothing is left behind when a limit cannot be set.
func makeCgroup(parent, name string, s tasksize.Size) (string, error) {
	files := cgroupFiles(s)
	if parent == "" || len(files) == 0 {
		return "", errors.New("no cgroup")
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	for file, value := range files {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
			_ = os.Remove(dir)
			return "", fmt.Errorf("cgroup %s: %w", file, err)
		}
	}
	return dir, nil
}

// gomaxprocs is the GOMAXPROCS of a sandbox of cpuUnits: its vCPUs, rounded
// up; "" when the size sets none.
func gomaxprocs(cpuUnits int) string {
	if cpuUnits <= 0 {
		return ""
	}
	return strconv.Itoa((cpuUnits + 1023) / 1024)
}

// oomKilled reports whether the cgroup's memory.max killed one of its
// processes (memory.events' oom_kill count); false without a cgroup.
func oomKilled(cgroup string) bool {
	if cgroup == "" {
		return false
	}
	raw, err := os.ReadFile(filepath.Join(cgroup, "memory.events"))
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strings.TrimSpace(n) != "0"
		}
	}
	return false
}
