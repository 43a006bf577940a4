package etcdstore_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/etcdserver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/urltest"
)

// TestOpenCredentials: etcd://user:password@ (the URL form docs/etcd.md and
// docs/cli.md give) locks on a cluster with authentication enabled, and a
// wrong password is refused when the URL is opened with an error matching
// ErrRefused (the CLI's exit 77), not ErrUnavailable. The control: the same
// cluster refuses a client without credentials, so the credentials are
// what makes the first URL work.
func TestOpenCredentials(t *testing.T) {
	etcdctl := etcdserver.Etcdctl(t)
	c := etcdserver.Start(t)
	addr := c.Members[0].Addr()
	for _, args := range [][]string{{"user", "add", "root:s3cret"}, {"user", "grant-role", "root", "root"}, {"auth", "enable"}} {
		cmd := exec.Command(etcdctl, append([]string{"--endpoints", addr, "--dial-timeout", "5s"}, args...)...)
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("etcdctl %v: %v\n%s", args, err, out)
		}
	}
	ctx := ctxT(t, 30*time.Second)
	if err := faulttest.OpenAndLock(ctx, "etcd://root:s3cret@"+addr+"/auth", "k"); err != nil {
		t.Fatalf("with the credentials: %v", err)
	}
	_, err := driver.Open(ctx, "etcd://root:wrong@"+addr+"/auth")
	if !errors.Is(err, driver.ErrRefused) || errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("a wrong password: %v, want ErrRefused", err)
	}
	// Without credentials, or as a user whose role grants nothing under the
	// prefix, the lock is refused at once (ErrRefused ends a wait: retrying
	// cannot fix it), well before the 10 s wait bound.
	for _, who := range []string{"", "nobody:n0role@"} {
		if who != "" {
			cmd := exec.Command(etcdctl, "--endpoints", addr, "--dial-timeout", "5s", "--user", "root:s3cret", "user", "add", strings.TrimSuffix(who, "@"))
			cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("etcdctl user add: %v\n%s", err, out)
			}
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		err := faulttest.OpenAndLock(actx, "etcd://"+who+addr+"/auth", "k")
		cancel()
		if el := time.Since(start); !errors.Is(err, driver.ErrRefused) || el > 5*time.Second {
			t.Errorf("user %q: lock on a cluster with authentication enabled: %v after %v; want ErrRefused at once", who, err, el)
		}
	}
}

// TestOpenHonoursDeadline: ctx's deadline bounds Open's dialling when it
// is sooner than dial-timeout (so `dlock run --wait D` ends within D on an
// unreachable cluster); the error matches ErrUnavailable.
func TestOpenHonoursDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = driver.Open(ctx, "etcd://"+addr+"/x?dial-timeout=20s")
	if el := time.Since(start); !errors.Is(err, driver.ErrUnavailable) || el > 10*time.Second {
		t.Fatalf("Open on a closed port with a 300ms deadline: %v after %v; want ErrUnavailable well before dial-timeout (20s)", err, el)
	}
}

// TestOpenUnknownParameter: an unknown parameter, a TLS parameter on
// etcd:// and a repeated one are refused before any connection, naming it.
func TestOpenUnknownParameter(t *testing.T) {
	urltest.Refuses(t, "etcd://u:secret@127.0.0.1:1?session_ttl=10s", "session_ttl", "accepted: cacert, cert, dial-timeout, key, prefix, session-ttl")
	urltest.Refuses(t, "etcd://127.0.0.1:1?cacert=/etc/hostname", "cacert", "not a parameter of etcd:// (only of etcds://)")
	urltest.Refuses(t, "etcd://127.0.0.1:1?prefix=a&prefix=b", "prefix", "given 2 times")
}
