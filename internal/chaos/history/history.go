// Package history records what lock clients did as a history of operations,
// each an invocation and an outcome on a machine-wide monotonic clock, so that
// histories from several processes can be merged and checked together.
package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is the operation a client made.
type Kind string

// Operation kinds.
const (
	Acquire Kind = "acquire"
	Release Kind = "release"
	Extend  Kind = "extend"
	// Write is a write to the protected resource carrying the lease's fence.
	Write Kind = "write"
)

// Outcome is what a client learned about its operation.
type Outcome string

// Outcomes. Unknown is Jepsen's "info": the operation may or may not have
// taken effect (a timeout or a broken connection), so a checker must allow
// both; an acquire with an unknown outcome may hold the lock until its TTL.
const (
	Pending Outcome = ""
	Ok      Outcome = "ok"
	Failed  Outcome = "fail"
	Unknown Outcome = "info"
)

// Op is one operation of a history. Times are nanoseconds of CLOCK_MONOTONIC,
// which is shared by every process on the machine (Go's own monotonic reading
// is process-relative and cannot be compared across processes).
type Op struct {
	Client  int           `json:"client"`
	Kind    Kind          `json:"kind"`
	Key     string        `json:"key"`
	Token   string        `json:"token,omitempty"` // TokenID of the token, never the token
	TTL     time.Duration `json:"ttl,omitempty"`
	Call    int64         `json:"call"`
	Return  int64         `json:"return"`
	Outcome Outcome       `json:"outcome"`
	// Fence is the holding's fencing token; 0 on an ok acquire means the
	// client could not observe it (Do's function does not see its lease).
	Fence uint64 `json:"fence,omitempty"`
	// ValidUntil is the end of the validity the client believed its lease
	// had when it recorded the op (acquire or extend ok, release). It can move
	// back (an Extend shorter than the lease): the latest record counts.
	ValidUntil int64 `json:"valid_until,omitempty"`
	// Renew marks an acquire of a lease the client renews automatically:
	// renewals are not recorded, so the key may stay held until TTL after
	// the lease's last recorded operation.
	Renew bool `json:"renew,omitempty"`
	// Bound, on an acquire with an unknown outcome, is how long after Return
	// the key may stay held by it at most, when the library promises to give
	// such a holding back (a wait cancelled mid-call); 0 means until its TTL.
	Bound time.Duration `json:"bound,omitempty"`
	// Applied, on an acquire with an unknown outcome, is when the store is
	// known to have applied it, if that was after Return (the store's own
	// record of the holding says so): the request reached the store late,
	// possibly after the library's release of it, so the key may stay held
	// until Applied plus the TTL whatever Bound says (Client.Lock documents
	// it). 0 if not known.
	Applied int64  `json:"applied,omitempty"`
	Value   int64  `json:"value,omitempty"` // for writes: the value written
	ReqID   string `json:"req,omitempty"`   // for writes: the request id
	Err     string `json:"err,omitempty"`
}

// String describes op for failure messages.
func (o Op) String() string {
	return fmt.Sprintf("c%d %s %q tok=%s fence=%d [%d,%d] %s valid_until=%d %s",
		o.Client, o.Kind, o.Key, o.Token, o.Fence, o.Call, o.Return, o.Outcome, o.ValidUntil, o.Err)
}

// Now returns CLOCK_MONOTONIC in nanoseconds. It panics only if the kernel
// lacks CLOCK_MONOTONIC, which Linux always has.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("history: clock_gettime: %v", err))
	}
	return ts.Nano()
}

// Mono converts a time.Time taken in this process (with a monotonic reading,
// such as dlock.Lease.ValidUntil) to the CLOCK_MONOTONIC scale of Now.
func Mono(t time.Time) int64 {
	return Now() + int64(time.Until(t))
}

// TokenID abbreviates a secret token to a stable, non-reversible id fit for
// logs and histories: the first 12 hex digits of its SHA-256.
func TokenID(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}

// Recorder collects the operations of one process. It is safe for concurrent
// use.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Invoke records the start of an operation and returns it; complete it with
// Recorder.Finish. A Pending op left unfinished is reported as Unknown.
func (r *Recorder) Invoke(client int, kind Kind, key string) *Op {
	return &Op{Client: client, Kind: kind, Key: key, Call: Now()}
}

// Finish stamps op's return time and outcome and appends it to the history.
func (r *Recorder) Finish(op *Op, out Outcome) {
	op.Return = Now()
	op.Outcome = out
	r.Add(*op)
}

// Add appends a complete operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

// Ops returns a copy of the history so far, ordered by call time.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	Sort(out)
	return out
}

// Sort orders ops by call time, then return time.
func Sort(ops []Op) {
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Call != ops[j].Call {
			return ops[i].Call < ops[j].Call
		}
		return ops[i].Return < ops[j].Return
	})
}

// Encode writes ops as JSON lines.
func Encode(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("history: encode: %w", err)
		}
	}
	return nil
}

// Decode reads JSON lines written by Encode. It returns the ops read so far
// and an error if the input is malformed.
func Decode(r io.Reader) ([]Op, error) {
	dec := json.NewDecoder(r)
	var ops []Op
	for dec.More() {
		var op Op
		if err := dec.Decode(&op); err != nil {
			return ops, fmt.Errorf("history: decode: %w", err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}
