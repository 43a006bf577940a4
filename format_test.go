package dlock_test

import (
	"fmt"
	"strings"
	"testing"

	"example.com/dlock"
)

func TestFormattingNeverShowsTheToken(t *testing.T) {
	c, _ := newClient(t)
	owner := dlock.NewOwner()
	l := mustLock(t, c, dlock.ContextWithOwner(testCtx(t), owner), "k")
	defer release(t, l)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{l, owner} {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, l.Token()) {
				t.Fatalf("fmt %s of %T shows the token: %s", verb, v, out)
			}
		}
	}
	if got := fmt.Sprint(l); !strings.Contains(got, dlock.TokenDigest(l.Token())) || !strings.Contains(got, `"k"`) {
		t.Fatalf("lease formats as %q, want key and token digest", got)
	}
}
