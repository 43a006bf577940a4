package dlock

import (
	"context"
	"sync"
	"time"
)

// Holdings of one explicit Owner on one key (re-entries, nested Do) share
// one store record under the owner's token, and the store sets its expiry
// outright on every Extend. A record is what the Client knows of such a
// shared record, so that one holding never takes another's validity away:
//
//   - Calls that set the record's expiry (acquisition, Extend, renewal) run
//     one at a time, and an Extend or renewal asks the store for at least
//     the TTL that every other live holding last set: Extend(short) on a
//     nested lease, or a short renewal period, shortens only its own lease's
//     validity, never the store's record under the others.
//   - The store may keep holds that no live lease accounts for: a lease that
//     ended without a confirmed release (lost on the local clock, a release
//     whose context had ended or whose reply was lost), an acquisition
//     whose reply was lost. None can be given back while another holding of
//     the owner lives (a token-checked release would take that holding's
//     hold), so they are counted, and once the last live holding of the
//     owner in this Client ends, the Client gives back every hold the token
//     may still have, in the background, retried until the store confirms.
//     Acquisitions of the same owner and key wait for that give-back.
//   - An acquisition with no answer may be applied after its give-back
//     found nothing to release (its request was still on its way), and a
//     later holding of the owner would then absorb that late hold and
//     extend it. So for a while (the give-back bound) the Client remembers
//     how many such holds may come: a grant reporting more holds than the
//     record accounts for counts them as holds to give back, and the
//     give-back after the next last holding tries them once more.
//
// The rule holds within one Client: an Owner used with two Clients of the
// same store has two records, and neither knows the other's holdings.

// records holds the Client's records, one per key and owner token.
type records struct {
	mu sync.Mutex
	m  map[recordKey]*record
	// late remembers, past its record, the holds that acquisitions with no
	// answer may still add (see above).
	late map[recordKey]lateHolds
}

// lateHoldsCounted is false only in tests' controls: late holds that a
// grant reports are then not given back.
var lateHoldsCounted = true

// lateHolds is what may still arrive for a record: at most n holds, until.
type lateHolds struct {
	n     int
	until time.Time
}

type recordKey struct{ key, token string }

// record is the Client's side of an owner's store record. Guarded by
// records.mu.
type record struct {
	recordKey
	members   map[*Lease]time.Duration // live leases, with the TTL each set last
	acquiring int                      // acquisitions in flight
	// holds bounds the holds the store may keep for the token: grants and
	// unanswered acquisitions, less confirmed releases.
	holds int
	// unanswered counts the acquisitions with no answer among holds: those
	// the give-back finds nothing of may still be applied (late).
	unanswered int
	late       lateHolds
	// probe says a holding joined since the last give-back: the next one
	// tries the late holds again.
	probe  bool
	maxTTL time.Duration // the longest lease that joined: bounds the give-back
	stray  bool          // the store may keep holds no live lease accounts for
	// notBefore is the latest validity a lease that left without a confirmed
	// release reported: the give-back waits for it.
	notBefore time.Time
	calling   bool          // a call setting the expiry is under way
	callDone  chan struct{} // closed when it ends, if someone waits
	giving    chan struct{} // non-nil while a give-back runs; closed when it ends
}

// enter registers an acquisition of key by an owner's token, waiting (as
// long as ctx allows) for a give-back of the same record to end.
func (rs *records) enter(ctx context.Context, key, token string) (*record, error) {
	rs.mu.Lock()
	for {
		r := rs.get(key, token)
		if r.giving == nil {
			r.acquiring++
			rs.mu.Unlock()
			return r, nil
		}
		ch := r.giving
		rs.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		rs.mu.Lock()
	}
}

func (rs *records) get(key, token string) *record {
	k := recordKey{key, token}
	if rs.m == nil {
		rs.m = make(map[recordKey]*record)
	}
	r := rs.m[k]
	if r == nil {
		r = &record{recordKey: k, members: make(map[*Lease]time.Duration), late: rs.late[k]}
		delete(rs.late, k)
		rs.m[k] = r
	}
	return r
}

// adopt makes l, a Do's lease of a fresh token that the Do's function
// re-enters through its context (the token is then an owner's), a holding
// of the record of its key and token. It waits, as long as ctx allows, for
// a call of l under way, so that no call of l made without the record's
// rules overlaps the re-entry. A lease that ended is not adopted.
func (c *Client) adopt(ctx context.Context, l *Lease) {
	if l.v.BeginCall(ctx) != nil {
		return
	}
	defer l.v.EndCall()
	ttl, _ := l.v.Current()
	rs := &c.records
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if l.rec.Load() != nil {
		return
	}
	r := rs.get(l.key, l.token)
	l.v.IfLive(func() {
		l.rec.Store(r)
		r.members[l] = ttl
		r.holds++
		r.maxTTL = max(r.maxTTL, ttl)
		r.probe = true
	})
	c.settleRecord(r) // forgets it if l had ended
}

// begin waits, as long as ctx allows, until no call setting r's expiry is
// under way, then marks one.
func (rs *records) begin(ctx context.Context, r *record) error {
	rs.mu.Lock()
	for r.calling {
		if r.callDone == nil {
			r.callDone = make(chan struct{})
		}
		ch := r.callDone
		rs.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		rs.mu.Lock()
	}
	r.calling = true
	rs.mu.Unlock()
	return nil
}

// tryBegin marks a call setting r's expiry, unless one is under way.
func (rs *records) tryBegin(r *record) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.calling {
		return false
	}
	r.calling = true
	return true
}

// end ends the call begun by begin or tryBegin.
func (rs *records) end(r *record) {
	rs.mu.Lock()
	r.calling = false
	if r.callDone != nil {
		close(r.callDone)
		r.callDone = nil
	}
	rs.mu.Unlock()
}

// floor returns the longest TTL that a live lease of r other than l set
// last: what a call setting the record's expiry must ask for at least.
func (rs *records) floor(r *record, l *Lease) time.Duration {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var f time.Duration
	for m, ttl := range r.members {
		if m != l {
			f = max(f, ttl)
		}
	}
	return f
}

// set records the TTL that l's call set the record's expiry for.
func (rs *records) set(r *record, l *Lease, ttl time.Duration) {
	rs.mu.Lock()
	if _, ok := r.members[l]; ok {
		r.members[l] = ttl
	}
	rs.mu.Unlock()
}

// joined adds l, a lease just granted, to r: before its expiry timer is
// armed, so that its end finds it there.
func (c *Client) joined(r *record, l *Lease) {
	c.records.mu.Lock()
	r.members[l] = l.ttl
	r.holds++
	r.maxTTL = max(r.maxTTL, l.ttl)
	r.probe = true
	if extra := int(l.holds) - r.holds; extra > 0 && r.late.n > 0 && lateHoldsCounted && c.cfg.clock.Now().Before(r.late.until) {
		extra = min(extra, r.late.n) // late holds the grant counted: give them back
		r.late.n -= extra
		r.holds += extra
		r.stray = true
	}
	c.records.mu.Unlock()
}

// strayHold counts a hold the store may have granted r's token that no
// lease will account for (a grant whose validity ran out on arrival).
func (c *Client) strayHold(r *record) {
	c.records.mu.Lock()
	r.holds++
	r.stray = true
	c.records.mu.Unlock()
}

// acquired ends an acquisition entered with enter; unsure is the number of
// its attempts that got no answer (each may have left a hold).
func (c *Client) acquired(r *record, unsure int) {
	rs := &c.records
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r.acquiring--
	r.holds += unsure
	r.unanswered += unsure
	r.stray = r.stray || unsure > 0
	c.settleRecord(r)
}

// How a lease left its record.
const (
	leftReleased    = iota // its hold was given back, or the store said the token held nothing
	leftUnconfirmed        // its hold may remain: a release with no answer, Close
	leftExpired            // lost on the local clock: its hold may remain, and its validity ran to the end
)

// left removes l from r once it ended, how says how (leftReleased...). The
// give-back of a lease that expired waits for the end of its validity.
func (c *Client) left(r *record, l *Lease, how int) {
	rs := &c.records
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, ok := r.members[l]; !ok {
		return // left already
	}
	delete(r.members, l)
	switch how {
	case leftReleased:
		r.holds = max(0, r.holds-1)
	case leftExpired:
		if u := l.v.ValidUntil(); u.After(r.notBefore) {
			r.notBefore = u
		}
		fallthrough
	default:
		r.stray = true
	}
	c.settleRecord(r)
}

// settleRecord forgets r once nothing of it is live, giving back first the
// holds that the store may keep. Called with records.mu held.
func (c *Client) settleRecord(r *record) {
	if len(r.members) > 0 || r.acquiring > 0 || r.giving != nil {
		return
	}
	now := c.cfg.clock.Now()
	late := 0 // late holds that may have arrived since the last give-back
	if r.probe && lateHoldsCounted && now.Before(r.late.until) {
		late = r.late.n
	}
	n := late
	if r.stray {
		n += r.holds
	}
	if n == 0 {
		c.records.forget(r, now)
		return
	}
	r.giving, r.probe = make(chan struct{}), false
	bound := max(r.maxTTL, c.cfg.ttl)
	c.giveBack(r.key, r.token, n, bound, r.notBefore, func(left int) {
		c.records.mu.Lock()
		close(r.giving)
		r.giving = nil
		// What the store did not have may still come: at most the late
		// holds tried and the acquisitions with no answer.
		r.late.n += min(left, late+r.unanswered) - late
		if r.unanswered > 0 {
			r.late.until = c.cfg.clock.Now().Add(c.giveBackBound(bound))
		}
		r.holds, r.unanswered, r.stray, r.notBefore = 0, 0, false, time.Time{}
		c.settleRecord(r)
		c.records.mu.Unlock()
	})
}

// forget deletes r, which nothing live uses, keeping the late holds it may
// still see until their time is up. Called with rs.mu held.
func (rs *records) forget(r *record, now time.Time) {
	delete(rs.m, r.recordKey)
	for k, lh := range rs.late {
		if !now.Before(lh.until) {
			delete(rs.late, k)
		}
	}
	if r.late.n > 0 && now.Before(r.late.until) {
		if rs.late == nil {
			rs.late = make(map[recordKey]lateHolds)
		}
		rs.late[r.recordKey] = r.late
	}
}
