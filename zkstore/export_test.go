package zkstore

// SetUnprotected makes s retry a create that lost its connection without
// looking for the node it may have made: the naive client of the
// protected-mode test's negative control.
func SetUnprotected(s *Store, on bool) { s.unprotected = on }

// SetCreateFirst makes s's Acquire create its node without listing the
// lock path first (the variant measured by BenchmarkAcquireStrategy).
func SetCreateFirst(s *Store, on bool) { s.createFirst = on }

// Syncs returns how many syncs s has sent for its calls (KeepAlive's not
// counted).
func Syncs(s *Store) int64 { return s.syncs.Load() }

// ConnLoss is connLoss: a raw transport error marked as a connection loss.
var ConnLoss = connLoss

// Requests returns how many ZooKeeper requests s has sent.
func Requests(s *Store) int64 { return s.reqs.Load() }

// SetStatCreate makes s read the stat of every node it creates, beside the
// listing (what the store did before it took the owner session from the
// conn): the control of the request-count test.
func SetStatCreate(s *Store, on bool) { s.statCreate = on }

// SetExistsWatch makes s's waiters watch their predecessor with exists (as
// the store did before), whose watch setData fires too: the control of
// TestWaiterNotWokenByTransfers.
func SetExistsWatch(s *Store, on bool) { s.existsWatch = on }

// AwaitSession is awaitSession: wait for a new conn's first session.
var AwaitSession = awaitSession

// Quiet is the store's logger that drops go-zookeeper's log lines.
type Quiet = quiet

// SetLooseNames makes s count every child with "lock-" as a participant
// and refuse no name (the rule before nested names were made independent):
// the control of TestNestedNamesAreIndependent.
func SetLooseNames(s *Store, on bool) { s.looseNames = on }

// SetSequentialDowngrade makes s's downgrade create its reader's node with
// a new sequence, after every writer queued meanwhile, as Curator 5.4 does
// (CURATOR-621): the control of TestDowngradeKeepsQueuedWriterOut.
func SetSequentialDowngrade(s *Store, on bool) { s.seqDowngrade = on }

// SetSemOwnOnly makes s count only the leases it recognises as dlock's,
// ignoring Curator's: the control of TestCuratorSemaphoreInterop.
func SetSemOwnOnly(s *Store, on bool) { s.semOwnOnly = on }

// SetRWHerd makes s's queued read-write waiters watch the lock path's
// children instead of one node: the control of TestRWQueuedWaitersInOrder.
func SetRWHerd(s *Store, on bool) { s.rwHerd = on }
