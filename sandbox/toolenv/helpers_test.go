package toolenv_test

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

func strconvUID(uid uint32) string { return strconv.FormatUint(uint64(uid), 10) }

// owner is the uid path belongs to.
func owner(t *testing.T, path string) uint32 {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Uid
}
