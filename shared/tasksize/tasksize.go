// Package tasksize is what a workspace's resource limits may be: the CPU,
// memory and disk a Fargate task can have, written as agent types write them
// ("2" vCPUs, "4G" of memory, "40G" of disk), parsed into Fargate's units.
//
// CPU is 0.25, 0.5, 1, 2, 4, 8 or 16 vCPUs, and each takes only some memory
// sizes (Fargate's table, Linux tasks):
//
//	0.25 vCPU   512M, 1G, 2G
//	0.5  vCPU   1G to 4G in 1G steps
//	1    vCPU   2G to 8G in 1G steps
//	2    vCPU   4G to 16G in 1G steps
//	4    vCPU   8G to 30G in 1G steps
//	8    vCPU   16G to 60G in 4G steps
//	16   vCPU   32G to 120G in 8G steps
//
// Disk is the task's ephemeral storage: 20G (what every task has) to 200G.
// Sizes take M, Mi, MB or MiB (mebibytes) and G, Gi, GB or GiB (gibibytes):
// Fargate counts in binary units whatever the suffix.
package tasksize

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Size is a task's CPU (in CPU units: 1024 per vCPU), memory (MiB) and disk
// (GiB); 0 is unset.
type Size struct {
	CPUUnits  int
	MemoryMiB int
	DiskGiB   int
}

// Disk bounds, in GiB.
const (
	MinDiskGiB = 20
	MaxDiskGiB = 200
)

// memoryRange is the memory one CPU size takes: from min to max in steps.
type memoryRange struct{ min, max, step int }

// table is Fargate's CPU → memory table, in CPU units and MiB.
var table = map[int]memoryRange{
	256:   {512, 2048, 512}, // 512M, 1G, 2G: 1.5G is the one step that is not a size
	512:   {1024, 4096, 1024},
	1024:  {2048, 8192, 1024},
	2048:  {4096, 16384, 1024},
	4096:  {8192, 30720, 1024},
	8192:  {16384, 61440, 4096},
	16384: {32768, 122880, 8192},
}

// cpuValues are the vCPU counts, in order.
var cpuValues = []int{256, 512, 1024, 2048, 4096, 8192, 16384}

var (
	cpuPattern  = regexp.MustCompile(`^[0-9]{1,2}(\.[0-9]{1,3})?$`)
	sizePattern = regexp.MustCompile(`^([0-9]{1,7})(M|Mi|MB|MiB|G|Gi|GB|GiB)$`)
)

// ParseCPU reads a vCPU count ("0.25", "1", "2"…) into CPU units.
func ParseCPU(v string) (int, error) {
	if !cpuPattern.MatchString(v) {
		return 0, fmt.Errorf("cpu must be a number of vCPUs: %s", CPUChoices())
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("cpu must be a number of vCPUs: %s", CPUChoices())
	}
	units := int(f * 1024)
	if float64(units) != f*1024 {
		return 0, fmt.Errorf("cpu must be one of %s vCPUs", CPUChoices())
	}
	if _, ok := table[units]; !ok {
		return 0, fmt.Errorf("cpu must be one of %s vCPUs", CPUChoices())
	}
	return units, nil
}

// ParseMemory reads a memory size ("512M", "4G") into MiB.
func ParseMemory(v string) (int, error) {
	mib, ok := parseSize(v)
	if !ok || mib <= 0 {
		return 0, fmt.Errorf("memory must be a size like 512M or 4G")
	}
	return mib, nil
}

// ParseDisk reads a disk size ("40G") into GiB, within MinDiskGiB..MaxDiskGiB.
func ParseDisk(v string) (int, error) {
	mib, ok := parseSize(v)
	if !ok || mib%1024 != 0 {
		return 0, fmt.Errorf("disk must be a whole number of gibibytes like 40G, from %dG to %dG", MinDiskGiB, MaxDiskGiB)
	}
	gib := mib / 1024
	if gib < MinDiskGiB || gib > MaxDiskGiB {
		return 0, fmt.Errorf("disk must be from %dG to %dG (a Fargate task's ephemeral storage)", MinDiskGiB, MaxDiskGiB)
	}
	return gib, nil
}

func parseSize(v string) (int, bool) {
	m := sizePattern.FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	if strings.HasPrefix(m[2], "G") {
		n *= 1024
	}
	return n, true
}

// Check reports whether cpu units and memory MiB are a size a Fargate task
// can have, saying which memory sizes that CPU takes if not.
func Check(cpuUnits, memoryMiB int) error {
	r, ok := table[cpuUnits]
	if !ok {
		return fmt.Errorf("cpu must be one of %s vCPUs", CPUChoices())
	}
	valid := memoryMiB >= r.min && memoryMiB <= r.max && (memoryMiB-r.min)%r.step == 0
	if cpuUnits == 256 && memoryMiB == 1536 {
		valid = false
	}
	if !valid {
		return fmt.Errorf("%s vCPU takes %s of memory, not %s", FormatCPU(cpuUnits), MemoryChoices(cpuUnits), FormatMemory(memoryMiB))
	}
	return nil
}

// CPUChoices lists the vCPU counts, e.g. "0.25, 0.5, 1, 2, 4, 8 or 16".
func CPUChoices() string {
	out := make([]string, len(cpuValues))
	for i, u := range cpuValues {
		out[i] = FormatCPU(u)
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}

// MemoryChoices says which memory sizes cpuUnits takes.
func MemoryChoices(cpuUnits int) string {
	r := table[cpuUnits]
	if cpuUnits == 256 {
		return "512M, 1G or 2G"
	}
	return fmt.Sprintf("%s to %s in %s steps", FormatMemory(r.min), FormatMemory(r.max), FormatMemory(r.step))
}

// FormatCPU writes CPU units as vCPUs: "0.25", "2".
func FormatCPU(units int) string {
	return strconv.FormatFloat(float64(units)/1024, 'f', -1, 64)
}

// FormatMemory writes MiB as "512M", or "4G" when whole gibibytes.
func FormatMemory(mib int) string {
	if mib%1024 == 0 {
		return strconv.Itoa(mib/1024) + "G"
	}
	return strconv.Itoa(mib) + "M"
}

// FormatDisk writes GiB as "40G".
func FormatDisk(gib int) string { return strconv.Itoa(gib) + "G" }

// Parse reads a workspace's limits as agent types write them into a Size;
// an empty part is 0 (unset). A CPU and memory given together must be a size
// a Fargate task can have.
func Parse(cpu, memory, disk string) (Size, error) {
	var s Size
	var err error
	if cpu != "" {
		if s.CPUUnits, err = ParseCPU(cpu); err != nil {
			return Size{}, err
		}
	}
	if memory != "" {
		if s.MemoryMiB, err = ParseMemory(memory); err != nil {
			return Size{}, err
		}
	}
	if disk != "" {
		if s.DiskGiB, err = ParseDisk(disk); err != nil {
			return Size{}, err
		}
	}
	if s.CPUUnits != 0 && s.MemoryMiB != 0 {
		if err := Check(s.CPUUnits, s.MemoryMiB); err != nil {
			return Size{}, err
		}
	}
	return s, nil
}

// ForMemory is the smallest Fargate size that has at least memoryMiB of
// memory: the least CPU whose range reaches it, and its least memory step
// at or above it (a job's memory constraint). Above the table's largest it
// is the largest.
func ForMemory(memoryMiB int) Size {
	for _, cpu := range cpuValues {
		r := table[cpu]
		if memoryMiB > r.max {
			continue
		}
		mem := r.min
		for mem < memoryMiB || Check(cpu, mem) != nil {
			mem += r.step
		}
		return Size{CPUUnits: cpu, MemoryMiB: mem}
	}
	last := cpuValues[len(cpuValues)-1]
	return Size{CPUUnits: last, MemoryMiB: table[last].max}
}
