package tasksize_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/tasksize"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cpus := []struct {
		in   string
		want int
		ok   bool
	}{
		{"0.25", 256, true}, {"0.5", 512, true}, {"1", 1024, true}, {"1.0", 1024, true}, {"2", 2048, true},
		{"16", 16384, true}, {"3", 0, false}, {"0.3", 0, false}, {"32", 0, false}, {"1024", 0, false},
		{"", 0, false}, {"-1", 0, false}, {"2 vCPU", 0, false}, {"1e1", 0, false},
	}
	for _, c := range cpus {
		got, err := tasksize.ParseCPU(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	mems := []struct {
		in   string
		want int
		ok   bool
	}{
		{"512M", 512, true}, {"512Mi", 512, true}, {"4G", 4096, true}, {"4Gi", 4096, true}, {"4GB", 4096, true}, {"4GiB", 4096, true},
		{"0G", 0, false}, {"4g", 0, false}, {"4", 0, false}, {"4T", 0, false}, {"1.5G", 0, false}, {"99999999G", 0, false},
	}
	for _, c := range mems {
		got, err := tasksize.ParseMemory(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	disks := []struct {
		in   string
		want int
		ok   bool
	}{
		{"20G", 20, true}, {"21G", 21, true}, {"200G", 200, true}, {"19G", 0, false}, {"201G", 0, false}, {"40960M", 40, true}, {"40000M", 0, false},
	}
	for _, c := range disks {
		got, err := tasksize.ParseDisk(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDisk(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// Fargate's CPU → memory table, at its edges.
func TestCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cpu, mem int
		ok       bool
	}{
		{256, 512, true}, {256, 1024, true}, {256, 2048, true}, {256, 1536, false}, {256, 4096, false},
		{512, 1024, true}, {512, 4096, true}, {512, 512, false}, {512, 5120, false},
		{1024, 2048, true}, {1024, 8192, true}, {1024, 1024, false}, {1024, 9216, false}, {1024, 2560, false},
		{2048, 4096, true}, {2048, 16384, true}, {2048, 3072, false}, {2048, 17408, false},
		{4096, 8192, true}, {4096, 30720, true}, {4096, 31744, false},
		{8192, 16384, true}, {8192, 20480, true}, {8192, 61440, true}, {8192, 17408, false}, {8192, 65536, false},
		{16384, 32768, true}, {16384, 40960, true}, {16384, 122880, true}, {16384, 36864, false}, {16384, 131072, false},
		{3072, 8192, false},
	}
	for _, c := range cases {
		if err := tasksize.Check(c.cpu, c.mem); (err == nil) != c.ok {
			t.Errorf("Check(%d, %d) = %v, want ok %v", c.cpu, c.mem, err, c.ok)
		}
	}
	if err := tasksize.Check(16384, 4096); err == nil || err.Error() != "16 vCPU takes 32G to 120G in 8G steps of memory, not 4G" {
		t.Errorf("Check(16 vCPU, 4G) = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0.25", "4G", "512Mi", "200G", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if u, err := tasksize.ParseCPU(s); err == nil {
			if tasksize.FormatCPU(u) == "" {
				t.Errorf("CPU %q parsed to %d", s, u)
			}
		}
		if m, err := tasksize.ParseMemory(s); err == nil && m <= 0 {
			t.Errorf("memory %q parsed to %d", s, m)
		}
		if d, err := tasksize.ParseDisk(s); err == nil && (d < tasksize.MinDiskGiB || d > tasksize.MaxDiskGiB) {
			t.Errorf("disk %q parsed to %d", s, d)
		}
	})
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cpu, mem, disk string
		want           tasksize.Size
		ok             bool
	}{
		{"2", "4G", "40G", tasksize.Size{CPUUnits: 2048, MemoryMiB: 4096, DiskGiB: 40}, true},
		{"", "", "", tasksize.Size{}, true},
		{"0.25", "", "", tasksize.Size{CPUUnits: 256}, true},
		{"0.25", "4G", "", tasksize.Size{}, false},
		{"1", "2G", "10G", tasksize.Size{}, false},
		{"x", "2G", "", tasksize.Size{}, false},
	} {
		got, err := tasksize.Parse(c.cpu, c.mem, c.disk)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Parse(%q, %q, %q) = %+v, %v", c.cpu, c.mem, c.disk, got, err)
		}
	}
}

func TestForMemory(t *testing.T) {
	for _, c := range []struct{ in, cpu, mem int }{
		{128, 256, 512}, {512, 256, 512}, {1500, 256, 2048}, {2048, 256, 2048}, {3000, 512, 3072},
		{4097, 1024, 5120}, {9000, 2048, 9216}, {30720, 4096, 30720}, {40000, 8192, 40960}, {200000, 16384, 122880},
	} {
		got := tasksize.ForMemory(c.in)
		if got.CPUUnits != c.cpu || got.MemoryMiB != c.mem || tasksize.Check(got.CPUUnits, got.MemoryMiB) != nil {
			t.Errorf("ForMemory(%d) = %+v, want %d CPU units, %d MiB", c.in, got, c.cpu, c.mem)
		}
	}
}
