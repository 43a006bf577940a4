package dlock

import "example.com/dlock/driver"

// caps holds a store's optional capabilities, found once by New through any
// wrappers (driver.As). A nil field means the store lacks it; each
// capability's documentation in package driver says what the Client does
// then.
type caps struct {
	notifier driver.Notifier
	queuer   driver.Queuer
	batch    driver.BatchExtender
	transfer driver.Transferer
	atomic   driver.Atomic
	qread    driver.QueueReader
	meta     bool // a driver.MetaKeeper that keeps metadata
}

func findCaps(s driver.Mutex) caps {
	var c caps
	c.notifier, _ = driver.As[driver.Notifier](s)
	c.queuer, _ = driver.As[driver.Queuer](s)
	c.batch, _ = driver.As[driver.BatchExtender](s)
	c.transfer, _ = driver.As[driver.Transferer](s)
	c.atomic, _ = driver.As[driver.Atomic](s)
	c.qread, _ = driver.As[driver.QueueReader](s)
	if mk, ok := driver.As[driver.MetaKeeper](s); ok {
		c.meta = mk.KeepsMeta()
	}
	return c
}
