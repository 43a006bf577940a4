//go:build race

package dlock_test

// raceEnabled says the race detector is on: sync.Pool then drops items at
// random, so allocation counts are not the ones of a normal build.
const raceEnabled = true
