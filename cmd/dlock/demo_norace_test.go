//go:build !race

package main

const demoRace = false
