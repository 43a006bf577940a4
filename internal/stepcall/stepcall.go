// Package stepcall spells driver.Atomic steps as the four calls tests use
// most (acquire and read, transfer and read, release and write, transfer and
// write), so that tests read as the operation they check.
package stepcall

import (
	"context"
	"time"

	"example.com/dlock/driver"
)

// AcquireRead acquires key for token and reads resource in one step.
func AcquireRead(ctx context.Context, a driver.Atomic, key, token string, ttl time.Duration, resource string) (driver.Grant, driver.Value, error) {
	return a.Apply(ctx, driver.Step{Action: driver.Acquire, Key: key, Token: token, TTL: ttl, Read: resource})
}

// TransferRead transfers key from one token to another and reads resource.
func TransferRead(ctx context.Context, a driver.Atomic, key, from, to string, ttl time.Duration, resource string) (driver.Grant, driver.Value, error) {
	return a.Apply(ctx, driver.Step{Action: driver.Transfer, Key: key, Token: from, To: to, TTL: ttl, Read: resource})
}

// ReleaseWrite writes value to resource and releases one hold of token.
func ReleaseWrite(ctx context.Context, a driver.Atomic, key, token, resource, value string) error {
	_, _, err := a.Apply(ctx, driver.Step{Action: driver.Release, Key: key, Token: token, Write: &driver.Write{Resource: resource, Value: value}})
	return err
}

// TransferWrite writes value to resource, transfers key from one token to
// another and, if read is not empty, reads it.
func TransferWrite(ctx context.Context, a driver.Atomic, key, from, to string, ttl time.Duration, resource, value, read string) (driver.Grant, driver.Value, error) {
	return a.Apply(ctx, driver.Step{Action: driver.Transfer, Key: key, Token: from, To: to, TTL: ttl, Write: &driver.Write{Resource: resource, Value: value}, Read: read})
}
