package main

import "errors"

// openRedlock builds a Redlock store over independent primaries. It is
// replaced when package redlock lands (issue: Redlock).
func openRedlock(urls []string, prefix string) (*openedStore, error) {
	return nil, exitWith(ExitUsage, errors.New("--redlock is not available yet"))
}
