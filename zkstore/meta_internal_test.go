package zkstore

import (
	"strings"
	"testing"

	"example.com/dlock/driver"
)

func TestNodeDataCarriesMetaAfterANewline(t *testing.T) {
	d, ok := parseData(nodeData(2, digest("tok"), "8", "host=a pid=1"))
	if !ok || d.holds != 2 || d.fence != "8" || d.meta != "host=a pid=1" {
		t.Fatalf("parseData = %+v, %t", d, ok)
	}
	if d, ok := parseData(nodeData(1, digest("tok"), "", "")); !ok || d.meta != "" {
		t.Fatalf("no meta: parseData = %+v, %t", d, ok)
	}
	// A foreign node's data is shown as text, bounded, one line.
	if got := foreignMeta([]byte("10.0.0.7")); got != "10.0.0.7" {
		t.Fatalf("foreignMeta = %q", got)
	}
	long := foreignMeta([]byte(strings.Repeat("é", driver.MaxMetaLen) + "\n\xff"))
	if len(long) > driver.MaxMetaLen || driver.ValidateMeta(long) != nil {
		t.Fatalf("foreignMeta of long data: %d bytes, %v", len(long), driver.ValidateMeta(long))
	}
	if got := foreignMeta([]byte("a\nb\xff")); got != "a?b?" {
		t.Fatalf("foreignMeta = %q, want control characters and bad bytes replaced", got)
	}
}
