package driver_test

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

type testParams struct {
	Prefix   string          `param:"prefix,nonempty"`
	Mode     string          `param:"mode,oneof=lease|session"`
	Sweep    time.Duration   `param:"sweep,positive,when=mode:lease"`
	MaxConns int             `param:"max-conns,positive,when=mode:session"`
	Migrate  bool            `param:"migrate"`
	Drift    float64         `param:"drift"`
	TLS      driver.TLSFiles `param:",scheme=xs"`
	Node     []string        `param:"node"`
}

func decode(t *testing.T, raw string) (testParams, url.Values, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := testParams{Mode: "lease"}
	rest, err := driver.DecodeQuery(u, &p, "dial_timeout")
	return p, rest, err
}

func TestDecodeQuery(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, rest, err := decode(t, "xs://h?prefix=p&sweep=2s&migrate=true&drift=0.1&node=a&node=b&dial_timeout=1s&cacert="+url.QueryEscape(ca))
	if err != nil {
		t.Fatal(err)
	}
	want := testParams{Prefix: "p", Mode: "lease", Sweep: 2 * time.Second, Migrate: true, Drift: 0.1, TLS: driver.TLSFiles{CACert: driver.File(ca)}, Node: []string{"a", "b"}}
	if p.Prefix != want.Prefix || p.Mode != want.Mode || p.Sweep != want.Sweep || !p.Migrate || p.Drift != want.Drift || p.TLS != want.TLS || strings.Join(p.Node, ",") != "a,b" {
		t.Errorf("decoded %+v, want %+v", p, want)
	}
	if rest.Encode() != "dial_timeout=1s" {
		t.Errorf("rest = %q, want the client's parameter alone", rest.Encode())
	}
}

func TestDecodeQueryRefuses(t *testing.T) {
	for _, c := range []struct{ url, param, says string }{
		{"x://h?tabel=x", "tabel", `unknown parameter "tabel" (accepted: cacert, cert, drift, key, max-conns, migrate, mode, node, prefix, sweep; and the client library's: dial_timeout)`},
		{"x://h?prefix=a&prefix=b", "prefix", "prefix= given 2 times"},
		{"x://h?prefix=", "prefix", "give a value"},
		{"x://h?mode=x", "mode", "want lease or session"},
		{"x://h?sweep=0s", "sweep", "not a positive duration"},
		{"x://h?sweep=1", "sweep", "not a positive duration"},
		{"x://h?migrate=yes", "migrate", "want true or false"},
		{"x://h?max-conns=2", "max-conns", "max-conns= applies to mode=session, not to mode=lease"},
		{"x://h?mode=session&sweep=1s", "sweep", "sweep= applies to mode=lease, not to mode=session"},
		{"x://h?max-conns=0&mode=session", "max-conns", "not a positive whole number"},
		{"x://h?cacert=/etc/hostname", "cacert", "not a parameter of x://"},
		{"xs://h?cacert=/nonexistent", "cacert", "no such file"},
		{"x://h?%zz", "", "query:"},
	} {
		_, _, err := decode(t, c.url)
		var pe *driver.ParamError
		if !errors.Is(err, driver.ErrInvalid) || !errors.As(err, &pe) || pe.Param != c.param || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want a ParamError for %q saying %q", c.url, err, c.param, c.says)
		}
	}
}
