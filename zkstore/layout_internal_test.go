package zkstore

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestSortIsCuratorsOrder: the suffix after the last "lock-" decides, as a
// string, whatever comes before it (UUIDs, go-zookeeper's 32-hex GUIDs,
// a bare "lock-"), and a child without "lock-" sorts by its whole name.
func TestSortIsCuratorsOrder(t *testing.T) {
	kids := []string{
		"_c_" + newUUID() + "-lock-0000000012",
		"_c_0123456789abcdef0123456789abcdef-lock-0000000010",
		"lock-0000000011",
		"_c_" + newUUID() + "-lock-0000000002",
		"nested",
	}
	sortChildren(kids)
	var keys []string
	for _, k := range kids {
		keys = append(keys, sortKey(k))
	}
	want := []string{"0000000002", "0000000010", "0000000011", "0000000012", "nested"}
	if !slices.Equal(keys, want) {
		t.Fatalf("order %v, want %v", keys, want)
	}
	if got := lockNodes(kids); len(got) != 4 || got[0] != kids[0] {
		t.Fatalf("lockNodes = %v", got)
	}
}

// TestNegativeSequencesAreRefused: ZooKeeper prints the sequence with
// %010d of a signed 32-bit counter; past 2^31 it is negative, and a string
// sort puts those nodes first and in reverse order of creation. The store
// detects it (wrapped) and takes no holding on that path; parsing gives the
// real numbers. Without the check, the newest node would be first: the
// control below shows it.
func TestNegativeSequencesAreRefused(t *testing.T) {
	name := func(seq int32) string { return "_c_" + newUUID() + "-lock-" + fmt.Sprintf("%010d", seq) }
	older, newer := name(math.MaxInt32), name(math.MinInt32)
	newest := name(math.MinInt32 + 1)
	kids := []string{older, newer, newest}
	sortChildren(kids)
	if kids[0] != newest || kids[1] != newer || kids[2] != older {
		t.Fatalf("control: Curator's string order of %v is not the broken one expected", kids)
	}
	if !wrapped(kids) {
		t.Fatal("wrapped() missed negative sequences")
	}
	if wrapped([]string{older, name(0), "nested-lock-dir"}) {
		t.Fatal("wrapped() on non-negative sequences")
	}
	if n, ok := sequence(newer); !ok || n != math.MinInt32 {
		t.Fatalf("sequence(%q) = %d, %v", newer, n, ok)
	}
	if len(fmt.Sprintf("%010d", int32(math.MinInt32))) != 11 {
		t.Fatal("a negative sequence is 11 characters")
	}
}

// TestKeyEncoding: names ZooKeeper accepts are kept as they are (Curator
// meets dlock at the same path); everything else round-trips.
func TestKeyEncoding(t *testing.T) {
	same := []string{"orders", "orders/42", "a b", "ünï ✓", "a*b{c}", "x:fence", "_c_x-lock-1"}
	for _, k := range same {
		if got := encodeKey(k); got != k {
			t.Errorf("encodeKey(%q) = %q, want it unchanged", k, got)
		}
	}
	hostile := []string{"", "/", "a//b", ".", "..", "a/../b", "a/./b", "%", "%2E", "\n\r\t", "\x00", "a\x7fb",
		"\u0085", "\ud7ff\ue000", "\uffff", string([]byte{0xff, 0xfe}), "/lead", "trail/"}
	for _, k := range append(same, hostile...) {
		enc := encodeKey(k)
		for _, seg := range strings.Split(enc, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Errorf("encodeKey(%q) = %q has segment %q", k, enc, seg)
			}
			for _, r := range seg {
				if !pathRune(r) {
					t.Errorf("encodeKey(%q) = %q has %U", k, enc, r)
				}
			}
		}
		dec, ok := decodeKey(enc)
		if !ok || dec != k {
			t.Errorf("decodeKey(encodeKey(%q)) = %q, %v", k, dec, ok)
		}
	}
	if _, ok := decodeKey("a%zz"); ok {
		t.Error("decodeKey accepted a bad escape")
	}
}

// FuzzKeyEncoding: every name round-trips to a path ZooKeeper accepts.
func FuzzKeyEncoding(f *testing.F) {
	for _, s := range []string{"a/b", "..", "%", "\x00/x", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		enc := encodeKey(k)
		if dec, ok := decodeKey(enc); !ok || dec != k {
			t.Fatalf("round trip of %q: %q -> %q %v", k, enc, dec, ok)
		}
		for _, seg := range strings.Split(enc, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("encodeKey(%q) = %q", k, enc)
			}
		}
	})
}

// TestNodeNames: our names are Curator's: _c_ + a canonical UUID + -lock-.
func TestNodeNames(t *testing.T) {
	u := newUUID()
	if len(u) != uuidLen || strings.Count(u, "-") != 4 || u[14] != '4' {
		t.Fatalf("UUID %q is not canonical version 4", u)
	}
	n := nodePrefix(u) + "0000000007"
	if !hasUUID(n, u) || uuidOf(n) != u || hasUUID(n, newUUID()) {
		t.Fatalf("protected-name helpers disagree on %q", n)
	}
	if d, ok := parseData(nodeData(3, digest("tok"), "", "")); !ok || d.holds != 3 || d.dig != digest("tok") || fenceOf(d, 7, 9) != 7 {
		t.Fatalf("parseData = %+v %v", d, ok)
	}
	if d, ok := parseData(nodeData(1, digest("tok"), transferMark, "")); !ok || fenceOf(d, 7, 9) != 9 {
		t.Fatalf("transferred: parseData = %+v %v", d, ok)
	}
	if d, ok := parseData(nodeData(2, digest("tok"), "8", "")); !ok || fenceOf(d, 7, 9) != 8 {
		t.Fatalf("re-entered after a transfer: parseData = %+v %v", d, ok)
	}
	for _, bad := range [][]byte{{127, 0, 0, 1}, []byte("dlock/1 0 ab"), []byte("dlock/1 1 ab x"), []byte("dlock/1 1")} {
		if _, ok := parseData(bad); ok {
			t.Fatalf("%q parsed as dlock data", bad)
		}
	}
	if strings.Contains(string(nodeData(1, digest("secret-token"), "", "")), "secret-token") {
		t.Fatal("node data carries the token")
	}
}
