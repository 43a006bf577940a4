package main

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/etcdserver"
	"example.com/dlock/internal/testcert"
	"example.com/dlock/internal/testkit"
)

// The etcd end-to-end tests run the built dlock binary (not in-process: the
// etcd client's goroutines would trip the package's goleak check) and the
// real etcdctl against an etcd started by internal/etcdserver.

// etcdStore starts a single etcd node and returns the store URL of the lock
// prefix "locks" on it, under which `etcdctl lock locks/NAME` queues too.
func etcdStore(t *testing.T) (url, endpoint string) {
	t.Helper()
	c := etcdserver.Start(t)
	return "etcd://" + c.Members[0].Addr() + "/locks", c.Members[0].Addr()
}

// criticalSection is a shell script that detects overlapping holders: it
// enters by creating the directory "in" (atomic; failing means another
// holder is inside), stays a while, leaves, and counts its entries.
const criticalSection = `d=$1
if ! mkdir "$d/in" 2>/dev/null; then echo overlap >> "$d/overlaps"; fi
sleep 0.3
rmdir "$d/in" 2>/dev/null
echo x >> "$d/entries"`

// etcdctlCmd prepares `etcdctl lock NAME -- argv` on endpoint, in its own
// process group so that the test can end it and its command together.
func etcdctlCmd(t *testing.T, endpoint, name string, argv ...string) *exec.Cmd {
	t.Helper()
	bin := etcdserver.Etcdctl(t)
	c := exec.Command(bin, append([]string{"--endpoints", endpoint, "lock", name, "--"}, argv...)...)
	c.Env = append(cleanEnv(), "ETCDCTL_API=3")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// countLines counts the lines of a file, 0 if it does not exist.
func countLines(t *testing.T, path string) int {
	t.Helper()
	if s := readFile(t, path); s != "" {
		return len(strings.Split(s, "\n"))
	}
	return 0
}

// runSections runs n dlock runs and m etcdctl locks of the critical section
// on the lock "job" at once, waits for all, and returns the entries and
// overlaps counted. With lock false every process runs the section bare
// (the negative control).
func runSections(t *testing.T, store, endpoint string, n, m int, lock bool) (entries, overlaps int) {
	t.Helper()
	dir := t.TempDir()
	section := []string{"sh", "-c", criticalSection, "sh", dir}
	var procs []*exec.Cmd
	for i := range n + m {
		var c *exec.Cmd
		switch {
		case !lock:
			c = exec.Command(section[0], section[1:]...)
		case i < n:
			c = dlockCmd(t, nil, append([]string{"run", "--store", store, "--key", "job", "--wait", "40s", "--"}, section...)...)
		default:
			c = etcdctlCmd(t, endpoint, "locks/job", section...)
		}
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, c)
	}
	for i, c := range procs {
		timer := time.AfterFunc(time.Minute, func() { _ = c.Process.Kill() })
		err := c.Wait()
		timer.Stop()
		if err != nil {
			t.Errorf("process %d (%v): %v", i, c.Args[:2], err)
		}
	}
	return countLines(t, filepath.Join(dir, "entries")), countLines(t, filepath.Join(dir, "overlaps"))
}

// TestEtcdRunExcludesRunAndEtcdctl: three `dlock run` and two real
// `etcdctl lock` processes on one name never overlap, and all get in. The
// negative control runs the same sections without the lock and must see an
// overlap, so the detector can fail.
func TestEtcdRunExcludesRunAndEtcdctl(t *testing.T) {
	store, ep := etcdStore(t)
	entries, overlaps := runSections(t, store, ep, 3, 2, true)
	if entries != 5 || overlaps != 0 {
		t.Fatalf("with the lock: %d entries (want 5), %d overlaps (want 0)", entries, overlaps)
	}
	entries, overlaps = runSections(t, store, ep, 3, 2, false)
	if entries != 5 || overlaps == 0 {
		t.Fatalf("negative control without the lock: %d entries, %d overlaps: the detector cannot see an overlap", entries, overlaps)
	}
}

// holdWithEtcdctl starts `etcdctl lock NAME -- sleep 60` and waits until
// dlock status reports NAME held; the test's cleanup kills its group.
func holdWithEtcdctl(t *testing.T, store, endpoint, name string) {
	t.Helper()
	c := etcdctlCmd(t, endpoint, "locks/"+name, "sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		_ = c.Wait()
	})
	testkit.WaitFor(t, 20*time.Second, "etcdctl to hold "+name, func() bool {
		r := runDlock(t, nil, "status", "--store", store, name)
		return strings.Contains(r.stdout, "held:     yes")
	})
}

// TestEtcdPrefixIsThePath: --prefix on an etcd URL sets its path (the etcd
// store takes no ?prefix=), agrees with the same path, and refuses another.
func TestEtcdPrefixIsThePath(t *testing.T) {
	for _, tc := range []struct{ url, prefix, want string }{
		{"etcd://h:2379", "locks", "etcd://h:2379/locks"},
		{"etcd://h:2379/?session-ttl=2s", "a/b", "etcd://h:2379/a/b?session-ttl=2s"},
		{"etcd://h:2379/locks", "locks", "etcd://h:2379/locks"},
		{"etcd://h:2379/locks", "", "etcd://h:2379/locks"},
		{"etcds://h:2379?cacert=ca.pem", "locks", "etcds://h:2379/locks?cacert=ca.pem"},
	} {
		got, err := withPrefix(tc.url, tc.prefix)
		if err != nil || got != tc.want {
			t.Errorf("withPrefix(%q, %q) = %q, %v; want %q", tc.url, tc.prefix, got, err, tc.want)
		}
	}
	if _, err := withPrefix("etcd://h:2379/locks", "other"); usageCode(err) != ExitUsage {
		t.Errorf("a disagreeing prefix: %v, want a usage error", err)
	}
}

// TestEtcdTLS: `dlock run` and `status` work over etcds:// on a server that
// serves clients over TLS only and requires a client certificate; a URL
// whose CA does not sign the server's certificate exits 69 (unavailable)
// with the handshake's reason, and so does a plain etcd:// URL.
func TestEtcdTLS(t *testing.T) {
	etcdserver.Binary(t)
	certs := testcert.ForTest(t)
	other := testcert.ForTest(t)
	addr := etcdserver.StartTLS(t, certs).Members[0].Addr()
	good := "etcds://" + addr + "/locks?" + url.Values{"cacert": {certs.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}}.Encode()
	if r := runDlock(t, nil, "run", "--store", good, "--key", "job", "--", "echo", "ran-under-tls"); r.code != 0 || !strings.Contains(r.stdout, "ran-under-tls") {
		t.Fatalf("run over etcds://: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runDlock(t, nil, "status", "--store", good, "job"); r.code != 0 || !strings.Contains(r.stdout, "held:     no") {
		t.Fatalf("status over etcds://: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	untrusted := "etcds://" + addr + "/locks?dial-timeout=1s&" + url.Values{"cacert": {other.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}}.Encode()
	if r := runDlock(t, nil, "status", "--store", untrusted, "job"); r.code != ExitUnavailable || !strings.Contains(r.stderr, "x509") {
		t.Errorf("status trusting another CA: code %d (want %d), stderr %q (want the x509 reason)", r.code, ExitUnavailable, r.stderr)
	}
	if r := runDlock(t, nil, "status", "--store", "etcd://"+addr+"/locks?dial-timeout=1s", "job"); r.code != ExitUnavailable {
		t.Errorf("status over plain etcd:// on a TLS-only server: code %d (want %d), stderr %q", r.code, ExitUnavailable, r.stderr)
	}
}
