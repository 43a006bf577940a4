package dlock

// QueuedWaiters returns how many local waiters of c queue for key: tests
// wait for a waiter to be queued before releasing, instead of sleeping.
func QueuedWaiters(c *Client, key string) int {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	if q := c.queues.m[key]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// BreakTurnsHandOn makes a waiter that leaves without the key after its
// wake-up hand nothing on (the tests' control), until the test ends.
func BreakTurnsHandOn(t interface{ Cleanup(func()) }) {
	turnsHandOn = false
	t.Cleanup(func() { turnsHandOn = true })
}

// BreakLateHolds makes grants ignore the late holds of acquisitions with no
// answer (the tests' control), until the test ends.
func BreakLateHolds(t interface{ Cleanup(func()) }) {
	lateHoldsCounted = false
	t.Cleanup(func() { lateHoldsCounted = true })
}
