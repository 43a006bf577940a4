package check

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"

	"example.com/dlock/internal/chaos/history"
)

// lockState is the model's state for one key: the owner (a token id), its
// hold count, the highest fence seen and the earliest moment (CLOCK_MONOTONIC
// ns) at which the server could have expired the owner's key.
type lockState struct {
	Owner  string
	Holds  int
	Fence  uint64
	ExpMin int64
}

type lockInput struct {
	Kind         history.Kind
	Token        string
	TTL          int64
	Call, Return int64
}

type lockOutput struct {
	Outcome history.Outcome
	Fence   uint64
}

// LockModel is a porcupine model of one lock per key. The store may expire a
// holder's key no earlier than TTL after the call that last set it, minus
// slack for the server's millisecond clock; before that, another token's
// grant is illegal. Fences of new holdings must exceed every fence seen
// (a grant recorded with fence 0, which its client could not see, is not
// checked).
// Operations with an unknown outcome may or may not have taken effect.
func LockModel(slack time.Duration) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{lockState{}} },
		Step: func(s, in, out any) []any {
			return step(s.(lockState), in.(lockInput), out.(lockOutput), int64(slack))
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(lockInput), out.(lockOutput)
			return fmt.Sprintf("%s(%s) -> %s fence %d", i.Kind, i.Token, o.Outcome, o.Fence)
		},
	}
	m.Partition = partitionByKey
	return m.ToModel()
}

func step(s lockState, in lockInput, out lockOutput, slack int64) []any {
	if out.Outcome == history.Unknown {
		return append([]any{s}, applied(s, in, lockOutput{Outcome: history.Ok, Fence: s.Fence}, slack, true)...)
	}
	return applied(s, in, out, slack, false)
}

// applied returns the states after in took effect with out. ghost marks an
// operation whose outcome is unknown (its fence was never seen).
func applied(s lockState, in lockInput, out lockOutput, slack int64, ghost bool) []any {
	mayHaveExpired := s.Owner == "" || in.Return >= s.ExpMin-slack
	exp := in.Call + in.TTL
	var next []any
	switch in.Kind {
	case history.Acquire:
		if out.Outcome != history.Ok {
			if s.Owner != "" && s.Owner != in.Token {
				next = append(next, s)
			}
			return next
		}
		// A fence of 0 was not observed by the client (see history.Op.Fence).
		unseen := ghost || out.Fence == 0
		if s.Owner == in.Token && (unseen || out.Fence == s.Fence) {
			next = append(next, lockState{s.Owner, s.Holds + 1, s.Fence, max(s.ExpMin, exp)})
		}
		if mayHaveExpired && (unseen || out.Fence > s.Fence) {
			next = append(next, lockState{in.Token, 1, max(s.Fence, out.Fence), exp})
		}
	case history.Release, history.Extend:
		if out.Outcome == history.Ok {
			if s.Owner != in.Token {
				return nil
			}
			if in.Kind == history.Extend {
				return []any{lockState{s.Owner, s.Holds, s.Fence, max(s.ExpMin, exp)}}
			}
			if s.Holds <= 1 {
				return []any{lockState{Fence: s.Fence}}
			}
			return []any{lockState{s.Owner, s.Holds - 1, s.Fence, s.ExpMin}}
		}
		if s.Owner != in.Token {
			next = append(next, s)
		} else if mayHaveExpired {
			next = append(next, lockState{Fence: s.Fence})
		}
	}
	return next
}

func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range ops {
		k := op.Metadata.(string)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

// Linearizable checks the lock operations of ops (acquire, extend, release)
// against LockModel. It returns nil only if porcupine answers Ok within
// timeout: Illegal and Unknown (timed out) are both failures.
func Linearizable(ops []history.Op, slack, timeout time.Duration) error {
	var pops []porcupine.Operation
	nextClient := 0
	for _, op := range ops {
		nextClient = max(nextClient, op.Client+1)
	}
	for _, op := range ops {
		if op.Kind == history.Write {
			continue
		}
		ret, client, ttl := op.Return, op.Client, op.TTL
		if op.Kind == history.Acquire && op.Outcome == history.Unknown && op.Bound > 0 {
			// The library gives such a holding back (history.Op.Bound) with a
			// release nobody records: it may end at any moment after the call.
			ttl = 0
		}
		if op.Outcome == history.Unknown || op.Outcome == history.Pending {
			// Never returned: it may take effect at any later time. A fresh
			// client id keeps that client's later ops from overlapping it.
			ret, client = math.MaxInt64, nextClient
			nextClient++
			op.Outcome = history.Unknown
		}
		pops = append(pops, porcupine.Operation{
			ClientId: client,
			Input:    lockInput{Kind: op.Kind, Token: op.Token, TTL: int64(ttl), Call: op.Call, Return: ret},
			Call:     op.Call, Return: ret,
			Output:   lockOutput{Outcome: op.Outcome, Fence: op.Fence},
			Metadata: op.Key,
		})
	}
	switch res := porcupine.CheckOperationsTimeout(LockModel(slack), pops, timeout); res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("check: linearizability unknown after %v (counted as a failure)", timeout)
	default:
		return fmt.Errorf("check: history of %d lock operations is not linearizable (%s)", len(pops), res)
	}
}
