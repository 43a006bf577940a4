package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Idempotency is the store side of the idempotency guard: one record per
// RecordID saying whether a request is being executed or what it answered.
// A record is either
//
//   - in flight: a lease of the executor that began it (its token, a fence,
//     an expiry on the store's clock), or
//   - completed: the result the executor stored (at most MaxResultLen
//     bytes), kept for the retention given at Begin, then forgotten.
//
// Both carry the request's fingerprint, so that a key reused for another
// request is refused. It is a Store: its Model declares the time model of
// the leases.
//
// Rules (checked by package drivertest's Idempotency suite):
//
//   - One executor at a time: among any number of concurrent BeginRecord
//     calls of one id, on any clients, exactly one is answered
//     RecordStarted; the others learn RecordInFlight (with the lease's time
//     left) until it completes, and RecordCompleted (with its result)
//     after.
//   - Fenced takeover: a BeginRecord on an in-flight record whose lease has
//     passed (store's clock) starts a new execution with a fence strictly
//     greater than the record's, and from then on the earlier executor's
//     CompleteRecord, AbandonRecord and ExtendRecord change nothing and
//     return a stale-executor error (ErrStaleFence and ErrNotHeld). A paused
//     executor cannot overwrite the result of the one that took over.
//   - One result: CompleteRecord stores the result only if token and fence
//     still own the in-flight record (a lease that has passed still owns it
//     while nobody took it over); a completed record never changes until it
//     is forgotten.
//   - The fingerprint is the request's: BeginRecord with another
//     fingerprint than the record's, in flight or completed, changes
//     nothing and returns a *FingerprintMismatchError (ErrMismatch).
//   - Resent calls are harmless: BeginRecord by the token that owns the
//     in-flight record answers RecordStarted with its fence again;
//     CompleteRecord by the token and fence that completed the record
//     answers nil and changes nothing.
//   - Bounded state: a completed record is forgotten once its retention
//     has passed; an in-flight one once its lease and then its retention
//     have passed; an abandoned one at once.
//   - Invalid arguments (ValidateRecord, a result over MaxResultLen) change
//     nothing and return an error matching ErrInvalid before any I/O.
//
// What the guard promises, per the IETF Idempotency-Key draft's terms:
// the record is exactly once (one stored result per id for the retention,
// replayed as it was stored). The execution is at most once at a time
// (no two executors within a lease) and at least once across crashes (a
// dead executor's work is taken over and run again), so an effect outside
// the store happens exactly once only if that effect deduplicates by a key
// stable across takeovers (the derived key package dlock hands the
// executor). Completing in the same transaction as the business writes (a
// SQL mode) is what makes database-only effects exactly once; stores
// without transactions cannot.
//
// Record ids are a namespace of their own: they share nothing with Mutex
// or Semaphore keys of the same store.
type Idempotency interface {
	Store

	// BeginRecord starts an execution of id for token, or says why not.
	// With no record (or a forgotten one) it creates an in-flight record
	// of token with a new fence, lease and retention, and answers
	// RecordStarted. On an in-flight record of another token whose lease
	// has not passed it answers RecordInFlight with the record's fence and
	// lease left, changing nothing; whose lease has passed, it takes the
	// record over (RecordStarted, TookOver, a greater fence). On a
	// completed record it answers RecordCompleted with the result. A
	// fingerprint other than the record's is a *FingerprintMismatchError.
	// A ctx already done makes it fail, changing nothing. An error
	// matching no sentinel means the outcome is unknown (token may own the
	// record: a resent BeginRecord tells).
	BeginRecord(ctx context.Context, id RecordID, token, fingerprint string, lease, retention time.Duration) (RecordBegin, error)

	// CompleteRecord stores result as id's answer and makes the record
	// completed, kept for its retention from now, if token and fence own
	// the in-flight record. Otherwise it changes nothing and returns an
	// error matching ErrStaleFence and NotHeld: ErrTaken if another
	// executor took the record over or completed it, ErrExpired if it is
	// gone (abandoned or forgotten). Done again by the token and fence that
	// completed it, it answers nil. An error matching no sentinel means the
	// result may or may not have been stored.
	CompleteRecord(ctx context.Context, id RecordID, token string, fence uint64, result []byte) error

	// AbandonRecord removes id's in-flight record if token and fence own
	// it, so that the next BeginRecord starts afresh; otherwise it changes
	// nothing and returns the stale-executor error of CompleteRecord. A
	// completed record is never removed.
	AbandonRecord(ctx context.Context, id RecordID, token string, fence uint64) error

	// ExtendRecord sets the lease of id's in-flight record to lease from
	// now (shorter or longer) if token and fence own it; otherwise it
	// changes nothing and returns the stale-executor error. An error
	// matching no sentinel means the lease may or may not have been set.
	ExtendRecord(ctx context.Context, id RecordID, token string, fence uint64, lease time.Duration) error
}

// RecordID names an idempotency record: a key within a scope (a client, a
// tenant, an endpoint; "" is a scope like any other). Records of one key in
// two scopes are unrelated.
type RecordID struct {
	Scope, Key string
}

// RecordState is what BeginRecord found.
type RecordState int

const (
	// RecordStarted: the caller is the executor; it must complete or
	// abandon the record (or let its lease pass).
	RecordStarted RecordState = iota + 1
	// RecordInFlight: another executor's lease is live.
	RecordInFlight
	// RecordCompleted: the record holds a result.
	RecordCompleted
)

// String names the state.
func (s RecordState) String() string {
	switch s {
	case RecordStarted:
		return "started"
	case RecordInFlight:
		return "in flight"
	case RecordCompleted:
		return "completed"
	}
	return fmt.Sprintf("RecordState(%d)", int(s))
}

// RecordBegin is what BeginRecord answers.
type RecordBegin struct {
	State RecordState
	// Fence is the execution's fencing token: the caller's when
	// RecordStarted, the live executor's when RecordInFlight, the one that
	// completed the record when RecordCompleted. Fences of one record
	// strictly increase with each takeover.
	Fence uint64
	// TookOver is set when RecordStarted replaced an executor whose lease
	// had passed: the work may have been partly done.
	TookOver bool
	// Remaining is the lease left (RecordStarted: the caller's, as asked;
	// RecordInFlight: the executor's, as the store saw it, or negative if
	// unknown) or, when RecordCompleted, the retention left.
	Remaining time.Duration
	// Result is the stored result when RecordCompleted (nil for an empty
	// one).
	Result []byte
}

// Bounds of the idempotency records.
const (
	// MaxResultLen is the largest result a record stores, in bytes.
	MaxResultLen = 1 << 20
	// MaxFingerprintLen is the longest fingerprint, in bytes (a digest of
	// the request, not the request).
	MaxFingerprintLen = 256
	// MaxTokenLen is the longest executor token, in bytes.
	MaxTokenLen = 256
)

// ErrMismatch means an idempotency key was reused with another request
// (another fingerprint); nothing was changed.
var ErrMismatch = errors.New("dlock: idempotency key reused for another request")

// FingerprintMismatchError is what BeginRecord returns for a fingerprint
// other than the record's. It matches ErrMismatch. The fingerprints are not
// in the text: they may be derived from secrets.
type FingerprintMismatchError struct {
	// State is the record's: in flight or completed.
	State RecordState
}

// Error says the key was used for another request.
func (e *FingerprintMismatchError) Error() string {
	return fmt.Sprintf("%s (the record is %s)", ErrMismatch, e.State)
}

// Is reports whether target is ErrMismatch.
func (e *FingerprintMismatchError) Is(target error) bool { return target == ErrMismatch }

// ResultTooLargeError is what CompleteRecord returns, before any I/O, for a
// result over MaxResultLen. It matches ErrInvalid: nothing was changed.
type ResultTooLargeError struct {
	Size int
}

// Error gives the size and the bound.
func (e *ResultTooLargeError) Error() string {
	return fmt.Sprintf("%s: a result of %d bytes is over the %d a record stores", ErrInvalid, e.Size, MaxResultLen)
}

// Is reports whether target is ErrInvalid.
func (e *ResultTooLargeError) Is(target error) bool { return target == ErrInvalid }

// StaleExecutor returns the error of a call by a token and fence that no
// longer own a record: it matches ErrStaleFence and NotHeld(taken).
func StaleExecutor(taken bool) error {
	return fmt.Errorf("%w: %w", ErrStaleFence, NotHeld(taken))
}

// ValidateRecord reports whether the arguments of a BeginRecord are
// acceptable: id's key as ValidateKey, its scope valid UTF-8 of at most
// MaxKeyLen bytes, a token of 1 to MaxTokenLen bytes, a fingerprint of at
// most MaxFingerprintLen bytes, lease > 0 and retention > 0. The error
// matches ErrInvalid. Stores call it (or ValidateRecordCall) before any
// I/O.
func ValidateRecord(id RecordID, token, fingerprint string, lease, retention time.Duration) error {
	if err := ValidateRecordCall(id, token, lease); err != nil {
		return err
	}
	switch {
	case len(fingerprint) > MaxFingerprintLen:
		return fmt.Errorf("%w: fingerprint of %d bytes is longer than %d", ErrInvalid, len(fingerprint), MaxFingerprintLen)
	case retention <= 0:
		return fmt.Errorf("%w: retention %v: want > 0", ErrInvalid, retention)
	}
	return nil
}

// ValidateRecordCall checks the arguments CompleteRecord, AbandonRecord
// and ExtendRecord share with BeginRecord (lease: ExtendRecord's; pass 1
// for the others). The error matches ErrInvalid.
func ValidateRecordCall(id RecordID, token string, lease time.Duration) error {
	if err := ValidateKey(id.Key); err != nil {
		return err
	}
	switch {
	case len(id.Scope) > MaxKeyLen:
		return fmt.Errorf("%w: scope of %d bytes is longer than %d", ErrInvalid, len(id.Scope), MaxKeyLen)
	case !utf8.ValidString(id.Scope):
		return fmt.Errorf("%w: scope is not valid UTF-8", ErrInvalid)
	case token == "" || len(token) > MaxTokenLen:
		return fmt.Errorf("%w: token of %d bytes: want 1 to %d", ErrInvalid, len(token), MaxTokenLen)
	case lease <= 0:
		return fmt.Errorf("%w: lease %v: want > 0", ErrInvalid, lease)
	}
	return nil
}

// ValidateResult reports whether a result fits a record: a
// *ResultTooLargeError (ErrInvalid) if not.
func ValidateResult(result []byte) error {
	if len(result) > MaxResultLen {
		return &ResultTooLargeError{Size: len(result)}
	}
	return nil
}
