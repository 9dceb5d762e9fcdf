package job

import "errors"

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
