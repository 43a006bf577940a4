package redisstore

import "strconv"

// seeded is a fence far above the server's clock in µs (about 1.8e15 in
// 2026) and below 2^53: a test that seeds a tombstone with it can tell the
// fence "last + 1" apart from the clock's.
const seeded = 4_000_000_000_000_000

// tombstone is the value of a released lock whose last fence is f.
func tombstone(f uint64) string { return "0:" + strconv.FormatUint(f, 10) + "::" }
