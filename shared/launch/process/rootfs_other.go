//go:build !linux

package process

import "errors"

type rootfs struct{ dir string }

func (r *rootfs) enter(...string) (func(), error) {
	return nil, errors.New("process launcher: an image's root filesystem needs Linux")
}
