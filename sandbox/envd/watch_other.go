//go:build !linux

package envd

// notify: the kernel reports no changes outside Linux; the watcher polls.
func (w *watcher) notify() bool { return false }
