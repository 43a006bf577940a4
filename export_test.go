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
