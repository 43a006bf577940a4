package chaos_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
	"example.com/dlock/redisstore"
)

// R21. Invariant: owner tokens carry 128 bits from crypto/rand. Pass: 10^5
// tokens are unique, 22 characters of unpadded base64url decoding to 16
// bytes, and each of the 128 bit positions is set in 50% ± 1% of them
// (6 standard deviations).
func TestTokenEntropy(t *testing.T) {
	c, err := dlock.New(memstore.New(nil), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 100_000
	seen := make(map[string]struct{}, n)
	var ones [128]int
	for range n {
		l, err := c.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		tok := l.Token()
		_ = l.Release(ctx)
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if len(tok) != 22 || err != nil || len(b) != 16 {
			t.Fatalf("token of %d chars decodes to %d bytes (%v)", len(tok), len(b), err)
		}
		if _, dup := seen[tok]; dup {
			t.Fatalf("duplicate token after %d", len(seen))
		}
		seen[tok] = struct{}{}
		for i := range 128 {
			ones[i] += int(b[i/8]>>(i%8)) & 1
		}
	}
	for i, k := range ones {
		if f := float64(k) / n; f < 0.49 || f > 0.51 {
			t.Errorf("bit %d set in %.4f of tokens", i, f)
		}
	}
}

// tokenLeaks returns the texts, among those the library produces for a
// lease and its failures, that contain the token.
func tokenLeaks(t *testing.T, texts map[string]string, tok string) []string {
	var out []string
	for what, s := range texts {
		if strings.Contains(s, tok) {
			out = append(out, what)
		}
	}
	return out
}

// Invariant: the token (a bearer secret) is never in an error string.
// Pass: none of the errors of contention, double release, loss, extend
// after loss or a non-owner release contains it.
func TestTokenNeverInErrors(t *testing.T) {
	_, rdb := newRedis(t)
	s, _ := redisstore.New(rdb, nil)
	defer s.Close()
	c, _ := dlock.New(s, dlock.WithTTL(5*time.Second))
	ctx := testCtx(t, time.Minute)
	l, err := c.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Token()
	texts := map[string]string{}
	_, err = c.TryLock(ctx, "k")
	texts["contended"] = fmt.Sprint(err)
	_ = rdb.Del(ctx, "dlock:{k}").Err()
	texts["extend-after-loss"] = fmt.Sprint(l.Extend(ctx, time.Second))
	texts["err-after-loss"] = fmt.Sprint(l.Err())
	texts["release-after-loss"] = fmt.Sprint(l.Release(ctx))
	l2, _ := c.TryLock(ctx, "k")
	texts["store-release-non-owner"] = fmt.Sprint(s.Release(ctx, "k", tok))
	_, err = s.Extend(ctx, "k", tok, time.Second)
	texts["store-extend-non-owner"] = fmt.Sprint(err)
	if l2 != nil {
		_ = l2.Release(ctx)
		texts["double-release"] = fmt.Sprint(l2.Release(ctx))
	}
	if leaks := tokenLeaks(t, texts, tok); len(leaks) > 0 {
		t.Fatalf("token in: %v", leaks)
	}
}

// Found by this suite: fmt's %v/%+v of a *Lease or an Owner prints the
// struct's fields, token included, so logging a lease logs the secret.
// Fix (core, lease.go/owner.go): give Lease and Owner String (and
// GoString/Format) methods that show the key, fence and an abbreviated
// token hash.
// Regression test for a bug this suite found: fmt printed a Lease's and an
// Owner's token. Both now format as a digest.
func TestTokenNotInFormattedLease(t *testing.T) {
	c, _ := dlock.New(memstore.New(nil), dlock.WithTTL(time.Minute))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	o := dlock.NewOwner()
	oc, err := c.TryLock(dlock.ContextWithOwner(ctx, o), "k2")
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Release(ctx)
	texts := map[string]string{
		"%v lease": fmt.Sprintf("%v", l), "%+v lease": fmt.Sprintf("%+v", l), "%#v lease": fmt.Sprintf("%#v", l),
		"%v owner": fmt.Sprintf("%v", o), "%+v owner": fmt.Sprintf("%+v", o),
	}
	leaks := tokenLeaks(t, texts, l.Token())
	leaks = append(leaks, tokenLeaks(t, texts, oc.Token())...)
	if len(leaks) > 0 {
		t.Fatalf("token printed by: %v", leaks)
	}
}
