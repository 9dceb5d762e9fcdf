package jobmode

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// clockTick is the kernel's USER_HZ, the unit of /proc's CPU times (100 on
// every Linux the sandbox runs on).
const clockTick = 100

// usageMeter measures the sandbox: the CPU time and resident memory of the
// agent's process tree (itself, the commands it runs and theirs). CPU is a
// percentage of what the sandbox was allocated (GOMAXPROCS, which the
// launcher sets from its size) over the time since the last sample.
type usageMeter struct {
	proc    string
	last    time.Time
	lastCPU time.Duration
}

func newUsageMeter() *usageMeter { return &usageMeter{proc: "/proc"} }

// sample returns the sandbox's use now; nil where /proc cannot tell.
func (m *usageMeter) sample(now time.Time) *sandboxwire.ResourceSample {
	procs := m.procs()
	self, ok := procs[os.Getpid()]
	if !ok {
		return nil
	}
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	// Itself, with the CPU of the children it has reaped, and its live
	// descendants.
	cpu, rss := self.cpu+self.reaped, self.rss
	queue := children[os.Getpid()]
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		p := procs[pid]
		cpu, rss = cpu+p.cpu+p.reaped, rss+p.rss
		queue = append(queue, children[pid]...)
	}
	out := &sandboxwire.ResourceSample{MemoryMB: float64(rss) / (1 << 20)}
	if !m.last.IsZero() && now.After(m.last) && cpu >= m.lastCPU {
		wall := now.Sub(m.last)
		out.CPUPercent = float64(cpu-m.lastCPU) / float64(wall) / float64(runtime.GOMAXPROCS(0)) * 100
	}
	m.last, m.lastCPU = now, cpu
	return out
}

// proc is one process as /proc shows it.
type proc struct {
	ppid int
	// cpu is its own CPU time, reaped that of the children it waited for.
	cpu, reaped time.Duration
	rss         int64
}

// procs reads every process of /proc.
func (m *usageMeter) procs() map[int]proc {
	out := map[int]proc{}
	entries, err := os.ReadDir(m.proc)
	if err != nil {
		return out
	}
	page := int64(os.Getpagesize())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(m.proc + "/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if p, ok := parseStat(string(raw), page); ok {
			out[pid] = p
		}
	}
	return out
}

// parseStat reads a /proc/<pid>/stat line: after the command (in
// parentheses, which may hold spaces), field 4 is the parent, 14-17 the CPU
// times (user, system, children's user and system), 24 the resident pages.
func parseStat(line string, page int64) (proc, bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 22 {
		return proc{}, false
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k-3], 10, 64); return v }
	tick := func(v int64) time.Duration { return time.Duration(v) * time.Second / clockTick }
	return proc{ppid: int(n(4)), cpu: tick(n(14) + n(15)), reaped: tick(n(16) + n(17)), rss: n(24) * page}, true
}
