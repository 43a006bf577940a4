package driver_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/testcert"
)

func TestTLSFromFiles(t *testing.T) {
	dir := t.TempDir()
	set, err := testcert.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := driver.TLSFromFiles(set.CA, set.ClientCert, set.ClientKey)
	if err != nil || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Fatalf("all three files: %+v, %v", tc, err)
	}
	if tc, err := driver.TLSFromFiles("", "", ""); err != nil || tc.RootCAs != nil || len(tc.Certificates) != 0 {
		t.Fatalf("no files (system roots, no client certificate): %+v, %v", tc, err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][3]string{
		{filepath.Join(dir, "missing.pem"), "", ""}, {junk, "", ""},
		{"", set.ClientCert, ""}, {"", "", set.ClientKey}, {"", set.ClientCert, junk},
	} {
		if _, err := driver.TLSFromFiles(c[0], c[1], c[2]); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("TLSFromFiles%q: %v, want ErrInvalid", c, err)
		}
	}
}
