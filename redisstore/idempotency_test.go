package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Tests of the idempotency records' Redis layout; the rules themselves are
// checked by the conformance suite (TestConformance/Idempotency/...).

// TestRecordKeysSpreadByTheirTag, on a real Cluster: a record's one key is
// in the slot of its {scope:key} tag, so records of one key in two scopes
// may live on two primaries, and no two (scope, key) pairs share a name.
func TestRecordKeysSpreadByTheirTag(t *testing.T) {
	_, rdb := newCluster(t)
	s := newStore(t, rdb)
	names := map[string]driver.RecordID{}
	for _, id := range []driver.RecordID{{Key: "a"}, {Scope: "c1", Key: "a"}, {Scope: "", Key: "c1:a"}, {Scope: "c1:", Key: "a"}, {Scope: "x}", Key: "y"}, {Scope: "x", Key: "}y"}, {Scope: "ü", Key: "k{z}"}} {
		name := s.RecordKey(id)
		if other, ok := names[name]; ok {
			t.Fatalf("%+v and %+v share the name %q", id, other, name)
		}
		names[name] = id
		tag := name[len("dlock:idem:{"):]
		want, err := rdb.ClusterKeySlot(testCtx(t), "{"+tag).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		if got, _ := rdb.ClusterKeySlot(testCtx(t), name).Result(); got != want {
			t.Fatalf("%+v: %q is in slot %d, its tag in %d", id, name, got, want)
		}
		b, err := s.BeginRecord(testCtx(t), id, "tok", "fp", time.Minute, time.Minute)
		if err != nil || b.State != driver.RecordStarted {
			t.Fatalf("BeginRecord(%+v) on a Cluster = %+v, %v", id, b, err)
		}
	}
}

// A value that is not a record where the record's hash would be is
// refused (ErrRefused) and left as it was.
func TestRecordRefusesForeignValues(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	id := driver.RecordID{Scope: "c", Key: "foreign"}
	if err := rdb.Set(ctx, s.RecordKey(id), "not a record", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginRecord(ctx, id, "tok", "fp", time.Minute, time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("BeginRecord over a string = %v, want ErrRefused", err)
	}
	if err := s.CompleteRecord(ctx, id, "tok", 1, []byte("x")); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("CompleteRecord over a string = %v, want ErrRefused", err)
	}
	if v, _ := rdb.Get(ctx, s.RecordKey(id)).Result(); v != "not a record" {
		t.Fatalf("the foreign value became %q", v)
	}
}

// The record expires on the server: its lease plus its retention while in
// flight, its retention once completed.
func TestRecordExpiresOnTheServer(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	id := driver.RecordID{Key: "ttl"}
	b, err := s.BeginRecord(ctx, id, "tok", "", time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if left := rdb.PTTL(ctx, s.RecordKey(id)).Val(); left <= time.Hour || left > time.Hour+time.Minute {
		t.Fatalf("in flight: PTTL %v, want (1h, 1h1m]", left)
	}
	if err := s.CompleteRecord(ctx, id, "tok", b.Fence, []byte("r")); err != nil {
		t.Fatal(err)
	}
	if left := rdb.PTTL(ctx, s.RecordKey(id)).Val(); left <= time.Hour-time.Minute || left > time.Hour {
		t.Fatalf("completed: PTTL %v, want about 1h", left)
	}
}
