package redlock

import (
	"testing"
	"time"

	"example.com/dlock/driver"
)

func TestMajorityView(t *testing.T) {
	held := func(tok string, holds int, rem time.Duration, fence uint64) driver.Info {
		return driver.Info{Held: true, Token: tok, Holds: holds, Remaining: rem, Fence: fence}
	}
	free := func(fence uint64) driver.Info { return driver.Info{Fence: fence} }
	cases := []struct {
		name  string
		infos []driver.Info
		want  driver.Info
	}{
		{"majority holds", []driver.Info{held("a", 2, 900*time.Millisecond, 7), held("a", 2, 800*time.Millisecond, 7),
			held("a", 1, 700*time.Millisecond, 6), free(5), free(9)},
			driver.Info{Held: true, Token: "a", Holds: 1, Remaining: 700 * time.Millisecond, Fence: 6}}, // only 1 hold, and fence 6, are on a quorum of holders
		{"minority holds", []driver.Info{held("a", 1, time.Second, 3), held("a", 1, time.Second, 3), free(3), free(3), free(4)},
			driver.Info{Fence: 3}}, // 4 is one node's: a failed attempt's grant, say
		{"split between tokens", []driver.Info{held("a", 1, time.Second, 3), held("a", 1, time.Second, 3),
			held("b", 1, time.Second, 4), held("b", 1, time.Second, 4), free(1)},
			driver.Info{Fence: 3}},
		{"released, late grants kept their own fences", []driver.Info{free(7), free(7), free(7), free(9), free(5)},
			driver.Info{Fence: 7}},
		{"too few fences", []driver.Info{free(7), free(7), {}, {}, {}}, driver.Info{}},
	}
	for _, tc := range cases {
		if got := majorityView(tc.infos, 3); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
