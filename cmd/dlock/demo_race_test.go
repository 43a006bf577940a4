//go:build race

package main

// demoRace builds the end-to-end binary with -race too: it reuses the
// test build's cache and checks the instances for data races.
const demoRace = true
