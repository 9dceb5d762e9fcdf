// Package harden protects the agent's process from the commands it runs.
//
// Process makes it not dumpable (Linux prctl PR_SET_DUMPABLE 0): its
// /proc/<pid>/environ, mem, maps and fds become root's, and no process of the
// same user may ptrace it, so a command running as the agent's user cannot
// read its initial environment (the bootstrap code, any key the launcher
// passed), its memory (the sandbox token) or its open files. It also stops
// core dumps. A process with CAP_SYS_PTRACE (root in a container given it)
// still can: on such hosts the tools run as another user (package toolenv).
package harden

// Dumpable reports whether the process may be dumped and read by others of
// its user; false once Process succeeded (always true where Process is a
// no-op).
func Dumpable() bool { return dumpable() }

// Process makes this process not dumpable. Children do not inherit it: a
// program they exec is dumpable again, and it is their own environment,
// scrubbed, that they hold.
func Process() error { return process() }
