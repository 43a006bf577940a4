package dlock_test

import (
	"context"
	"log/slog"
	"testing"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// The client's own cost on the hot path (Lock+Release, Do) over memstore,
// so that the store's round trip does not hide it.
func BenchmarkLockRelease(b *testing.B) {
	c, err := dlock.New(memstore.New(nil))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Lock(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDo(b *testing.B) {
	c, err := dlock.New(memstore.New(nil))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Do(ctx, "k", fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockReleaseObserved is BenchmarkLockRelease with an Observer
// whose logger is off: the cost of the events themselves.
func BenchmarkLockReleaseObserved(b *testing.B) {
	c, err := dlock.New(memstore.New(nil), dlock.WithObserver(dlock.SlogObserver(slog.New(slog.DiscardHandler))))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Lock(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
