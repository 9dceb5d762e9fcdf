//go:build !linux

package process

import "time"

func freezeTree(int) []int { return nil }

func killTree([]int) {}

func groupsBelow(int) []int { return nil }

func awaitExit(int, time.Duration) {}
