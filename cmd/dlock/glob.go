package main

import (
	"strings"
	"unicode/utf8"
)

// globPrefix is the literal start of a glob pattern: the text before its
// first unescaped metacharacter, with escapes removed. Listing asks the
// store for keys with this prefix and matches the rest here.
func globPrefix(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*', '?', '[':
			return b.String()
		case '\\':
			if i+1 < len(pattern) {
				i++
			}
			b.WriteByte(pattern[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// globMatch reports whether s matches pattern, with Redis' glob rules:
// * any run, ? one character, [abc] [a-z] [^a] a class, \x a literal x.
// Unlike path.Match, * and ? match '/' (etcd keys have them).
func globMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			pattern = strings.TrimLeft(pattern, "*")
			if pattern == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(pattern, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			_, n := utf8.DecodeRuneInString(s)
			pattern, s = pattern[1:], s[n:]
			continue
		case '[':
			if s == "" {
				return false
			}
			r, n := utf8.DecodeRuneInString(s)
			if ok, rest, valid := matchClass(pattern[1:], r); valid {
				if !ok {
					return false
				}
				pattern, s = rest, s[n:]
				continue
			}
			// An unclosed [ is a literal.
		case '\\':
			if len(pattern) > 1 {
				pattern = pattern[1:]
			}
		}
		if s == "" || s[0] != pattern[0] {
			return false
		}
		pattern, s = pattern[1:], s[1:]
	}
	return s == ""
}

// matchClass matches r against the class that starts after a '[' in p. It
// returns whether r is in the class, the pattern after the closing ']', and
// whether the class is closed at all.
func matchClass(p string, r rune) (ok bool, rest string, valid bool) {
	negate := strings.HasPrefix(p, "^")
	if negate {
		p = p[1:]
	}
	first := true
	for len(p) > 0 {
		if p[0] == ']' && !first {
			return ok != negate, p[1:], true
		}
		first = false
		if p[0] == '\\' && len(p) > 1 {
			p = p[1:]
		}
		lo, n := utf8.DecodeRuneInString(p)
		p = p[n:]
		hi := lo
		if len(p) > 1 && p[0] == '-' && p[1] != ']' {
			p = p[1:]
			if p[0] == '\\' && len(p) > 1 {
				p = p[1:]
			}
			hi, n = utf8.DecodeRuneInString(p)
			p = p[n:]
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		if lo <= r && r <= hi {
			ok = true
		}
	}
	return false, "", false
}
