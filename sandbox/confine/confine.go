// Package confine runs a command that can touch, of the file system, only
// what it is given: directories it may read (and run programs from) and
// directories it may write, beneath which everything is its; the rest does
// not exist for it, whatever its user could otherwise read. It uses Linux's
// Landlock, which needs no privilege: the agent re-runs its own executable
// as a helper (Command) that restricts itself and then executes the command,
// which with all it starts stays restricted. A symlink or ".." out of a
// granted directory leads nowhere: Landlock checks the file reached.
package confine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// helperArg, as the first argument, makes the executable the helper (Main).
const helperArg = "__ra_confine"

// selfExe is this process's executable, as the kernel links it.
const selfExe = "/proc/self/exe"

// Rules are what a confined command may reach.
type Rules struct {
	// Read are directories (or files) it may read and run programs from.
	Read []string
	// Write are directories it may read, write, create in and remove from.
	Write []string
}

// Devices are granted reading and writing besides Rules (/dev/null, ttys).
var devices = []string{"/dev"}

// SystemDirs are where programs, their libraries and configuration live: a
// confined shell needs to read them to run anything.
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys/devices/system/cpu"}

// Command returns a command that runs name with args confined by r: this
// executable, as the helper (the program's main must call Main first).
func Command(ctx context.Context, r Rules, name string, args ...string) (*exec.Cmd, error) {
	if _, err := ABI(); err != nil {
		return nil, err
	}
	argv := []string{helperArg}
	for _, p := range r.Read {
		argv = append(argv, "-r", p)
	}
	for _, p := range r.Write {
		argv = append(argv, "-w", p)
	}
	argv = append(append(argv, "--", name), args...)
	// Through the kernel's link to this executable, not its path: the
	// command's user (the tools') may not search the folders it is in.
	return exec.CommandContext(ctx, selfExe, argv...), nil
}

// Main runs the helper and never returns when this process was started as
// one (by Command); otherwise it returns at once. Call it first in main (and
// in TestMain of tests that confine commands).
func Main() {
	if len(os.Args) < 2 || os.Args[1] != helperArg {
		return
	}
	os.Exit(helper(os.Args[2:]))
}

// helper restricts the process by the rules in args, then executes the
// command after "--". 126: it could not be confined (nothing ran); 127: the
// command is not there.
func helper(args []string) int {
	var r Rules
	i := 0
	for ; i+1 < len(args) && args[i] != "--"; i += 2 {
		switch args[i] {
		case "-r":
			r.Read = append(r.Read, args[i+1])
		case "-w":
			r.Write = append(r.Write, args[i+1])
		default:
			fmt.Fprintf(os.Stderr, "confine: unknown argument %q\n", args[i])
			return 126
		}
	}
	if i >= len(args) || args[i] != "--" || i+1 >= len(args) {
		fmt.Fprintln(os.Stderr, "confine: no command")
		return 126
	}
	command := args[i+1:]
	path, err := exec.LookPath(command[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "confine: %v\n", err)
		return 127
	}
	// Landlock restricts the calling thread: the same one executes.
	runtime.LockOSThread()
	if err := restrict(r); err != nil {
		fmt.Fprintf(os.Stderr, "confine: %v\n", err)
		return 126
	}
	err = syscall.Exec(path, command, os.Environ()) //nolint:gosec // running the command it was given, confined, is the helper's job
	fmt.Fprintf(os.Stderr, "confine: %v\n", err)
	return 127
}
