package history

import (
	"bytes"
	"testing"
	"time"
)

func TestNowIsMonotonicAndMonoAgrees(t *testing.T) {
	a := Now()
	tm := time.Now().Add(time.Second)
	m := Mono(tm)
	b := Now()
	if b < a {
		t.Fatalf("Now went backwards: %d then %d", a, b)
	}
	if d := m - a; d < int64(900*time.Millisecond) || d > int64(1100*time.Millisecond) {
		t.Fatalf("Mono(now+1s) is %v after Now", time.Duration(d))
	}
}

func TestTokenIDHidesToken(t *testing.T) {
	tok := "c2VjcmV0LXRva2VuLXZhbHVlLTEyMw"
	id := TokenID(tok)
	if len(id) != 12 || bytes.Contains([]byte(tok), []byte(id)) || TokenID(tok) != id || TokenID(tok+"x") == id {
		t.Fatalf("TokenID(%q) = %q", tok, id)
	}
	if TokenID("") != "" {
		t.Fatal("TokenID of empty token is not empty")
	}
}

func TestRecorderRoundTrip(t *testing.T) {
	var r Recorder
	op := r.Invoke(1, Acquire, "k")
	op.Token, op.Fence = TokenID("t"), 7
	r.Finish(op, Ok)
	r.Add(Op{Client: 2, Kind: Release, Key: "k", Call: op.Call - 1, Return: op.Call, Outcome: Failed})
	ops := r.Ops()
	if len(ops) != 2 || ops[0].Client != 2 || ops[1].Return < ops[1].Call {
		t.Fatalf("ops = %v", ops)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, ops); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(&buf)
	if err != nil || len(back) != 2 || back[1] != ops[1] {
		t.Fatalf("decoded %v, %v", back, err)
	}
	if _, err := Decode(bytes.NewBufferString("{not json")); err == nil {
		t.Fatal("malformed input decoded without error")
	}
}
