package cmp

import (
	"flag"
	"time"
)

// Flags are the flags the etcd and ZooKeeper comparisons share.
type Flags struct {
	Dur    time.Duration // -duration: each timed scenario's length
	Quick  bool          // -quick: 1 s scenarios
	Only   string        // -scenarios: comma-separated, or all
	Rounds int           // -rounds: each scenario this many times
}

// Register defines -duration (5 s), -quick, -scenarios (all) and -rounds
// (1) on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.DurationVar(&f.Dur, "duration", 5*time.Second, "length of each timed scenario")
	fs.BoolVar(&f.Quick, "quick", false, "1 s scenarios")
	fs.StringVar(&f.Only, "scenarios", "all", "comma-separated scenarios, or all")
	fs.IntVar(&f.Rounds, "rounds", 1, "run every scenario this many times, the libraries taking turns to go first")
}

// Settle applies the parsed flags: -quick makes the duration 1 s, and
// there is at least one round.
func (f *Flags) Settle() {
	if f.Quick {
		f.Dur = time.Second
	}
	f.Rounds = max(f.Rounds, 1)
}
