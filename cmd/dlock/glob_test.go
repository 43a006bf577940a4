package main

import "testing"

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "a/b:c", true},
		{"orders:*", "orders:42", true},
		{"orders:*", "order:42", false},
		{"a?c", "abc", true},
		{"a?c", "a/c", true},
		{"a?c", "ac", false},
		{"[ab]x", "bx", true},
		{"[ab]x", "cx", false},
		{"[^ab]x", "cx", true},
		{"[a-c]x", "bx", true},
		{"[a-c]x", "dx", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"a[b", "a[b", true},
		{"*b*", "aaa", false},
		{"é?", "éx", true},
	} {
		if got := globMatch(c.pattern, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
	for p, want := range map[string]string{"*": "", "orders:*": "orders:", `a\*b*`: "a*b", "ab": "ab", "x[y]": "x"} {
		if got := globPrefix(p); got != want {
			t.Errorf("globPrefix(%q) = %q, want %q", p, got, want)
		}
	}
}
