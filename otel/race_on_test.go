//go:build race

package dlockotel_test

const raceEnabled = true
