//go:build !linux

package harden

// process does nothing where prctl does not exist; the tools' scrubbed
// environment still keeps the secrets out of their reach.
func process() error { return nil }

func dumpable() bool { return true }
