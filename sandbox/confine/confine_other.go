//go:build !linux

package confine

import "errors"

// ABI: no Landlock outside Linux.
func ABI() (int, error) { return 0, errors.New("landlock: Linux only") }

func restrict(Rules) error { return errors.New("landlock: Linux only") }
