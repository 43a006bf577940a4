package proc

import "testing"

// Missing ends t for a missing server binary: it fails the test under
// CI=true (see Required), where the package must be installed, and skips it
// otherwise. what names what is missing, install what to install.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (CI=true: install %s)", what, install)
	}
	t.Skipf("%s; install %s to run this test", what, install)
}

// Launched is the tail of a launcher's Start: it registers closeFn(v) with
// t.Cleanup when v is not nil (also after an error: a half-started server
// is stopped), fails t with err prefixed by prefix when err is not nil, and
// returns v.
func Launched[T any](t testing.TB, prefix string, v *T, err error, closeFn func(*T)) *T {
	t.Helper()
	if v != nil {
		t.Cleanup(func() { closeFn(v) })
	}
	if err != nil {
		t.Fatalf("%s: %v", prefix, err)
	}
	return v
}
