package etcdstore_test

import (
	"time"

	"example.com/dlock/internal/overlap"
)

// The fault tests (fault_test.go, quorum_test.go, child_test.go) run on
// their own 3-member clusters, with 3 s sessions. Their overlap detector
// records, for every holding, the window in which its holder acted as the
// holder: from the return of Lock to the moment it stopped (its work done,
// or its lease's Done seen). Two windows that intersect are two holders at
// once. The windows are taken on this process's monotonic clock, so every
// holder whose windows are compared runs in the test process.

// faultTTL is the session TTL of the fault tests.
const faultTTL = 3 * time.Second

// window is one holding as its holder saw it; windows collects them and
// finds the overlaps; faulttest.Hold and faulttest.Contenders record them
// (shared with the other stores' fault tests).
type (
	window  = overlap.Window
	windows = overlap.Recorder
)
