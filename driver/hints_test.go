package driver_test

import (
	"context"
	"net/url"
	"testing"

	"example.com/dlock/driver"
)

// An opener sees the hints its caller put in Open's context, and the zero
// hints (its defaults) when there are none.
func TestOpenHintsReachTheOpener(t *testing.T) {
	var got []driver.OpenHints
	driver.Register("hints-test", func(ctx context.Context, _ *url.URL) (*driver.Opened, error) {
		got = append(got, driver.OpenHintsFrom(ctx))
		return nil, driver.ErrInvalid
	})
	want := driver.OpenHints{NoIO: true, Conns: 7}
	_, _ = driver.Open(driver.WithOpenHints(context.Background(), want), "hints-test://x")
	_, _ = driver.Open(context.Background(), "hints-test://x")
	if len(got) != 2 || got[0] != want || got[1] != (driver.OpenHints{}) {
		t.Fatalf("the opener saw %+v, want %+v then the zero hints", got, want)
	}
}
