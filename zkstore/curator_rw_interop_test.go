package zkstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
)

// jvmRW drives a CuratorRW process: Curator 5.4's InterProcessReadWriteLock
// on a real JVM.
type jvmRW struct {
	in    io.Writer
	lines chan string
}

// startCuratorRW starts CuratorRW on the shared server and waits for its
// READY. It is killed when the test ends.
func startCuratorRW(t *testing.T, java, cp string) *jvmRW {
	t.Helper()
	return startJava(t, java, cp, "CuratorRW", strings.Join(server(t).Addrs(), ","))
}

// startJava starts the Java program class with args and waits for its
// READY. It is killed when the test ends.
func startJava(t testing.TB, java, cp, class string, args ...string) *jvmRW {
	t.Helper()
	cmd := exec.Command(java, append([]string{"-cp", cp, class}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	j := &jvmRW{in: in, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			j.lines <- sc.Text()
		}
		close(j.lines)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	j.expect(t, "READY", 30*time.Second)
	return j
}

// send writes one command line.
func (j *jvmRW) send(t testing.TB, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(j.in, format+"\n", args...); err != nil {
		t.Fatal(err)
	}
}

// expect waits up to d for the next line, which must be want.
func (j *jvmRW) expect(t testing.TB, want string, d time.Duration) {
	t.Helper()
	select {
	case l, ok := <-j.lines:
		if !ok || l != want {
			t.Fatalf("CuratorRW said %q (open %v), want %q", l, ok, want)
		}
	case <-time.After(d):
		t.Fatalf("CuratorRW did not say %q within %v", want, d)
	}
}

// quiet checks that the JVM says nothing for d (a Curator lock still
// waiting), and returns what it said otherwise.
func (j *jvmRW) quiet(d time.Duration) (string, bool) {
	select {
	case l := <-j.lines:
		return l, false
	case <-time.After(d):
		return "", true
	}
}

// jvmWait is how long a Curator waiter is given to (wrongly) get in, and
// jvmSlack how long it is given to get in once it may.
const jvmWait, jvmSlack = 700 * time.Millisecond, 10 * time.Second

// TestCuratorRWInterop: Curator's InterProcessReadWriteLock in a JVM and
// this store share one read-write lock on the same path, in both
// directions: a Java reader lets a dlock reader in and keeps a dlock
// writer out; a dlock writer keeps a Java reader out until it releases; a
// queued Java writer keeps later dlock readers out (writer preference
// across clients) and gets in once the reader ahead leaves; and a dlock
// downgrade keeps a queued Java writer out (CURATOR-621, which Curator
// 5.4's own downgrade has: the control, with the store downgrading as
// Curator 5.4 does, lets the Java writer in beside the reader).
func TestCuratorRWInterop(t *testing.T) {
	java, cp := curatorProgram(t)
	j := startCuratorRW(t, java, cp)
	root := uniq(t)
	s, o := dial(t, root, sessionTimeout, server(t).Addrs()...), dial(t, root, sessionTimeout, server(t).Addrs()...)
	ctx := ctxT(t, 2*time.Minute)
	rwp := func(key string) string { return s.RWRoot() + "/" + key }

	t.Run("JavaReaderAdmitsReadersNotWriters", func(t *testing.T) {
		j.send(t, "r1 read %s", rwp("a"))
		j.expect(t, "GOT r1 read", jvmSlack)
		w, r := tok(), tok()
		_, err := s.AcquireWrite(ctx, "a", w, time.Minute)
		var te *driver.RWTakenError
		if !errors.As(err, &te) || te.Held != driver.RWRead || te.Readers != 1 {
			t.Fatalf("a dlock writer while a Java reader holds: %v, want taken by 1 reader", err)
		}
		if _, err := o.AcquireRead(ctx, "a", r, time.Minute); !errors.As(err, &te) || !te.WriterWaiting {
			t.Fatalf("a new dlock reader behind the queued dlock writer: %v, want taken with a writer waiting", err)
		}
		j.send(t, "r1 release")
		j.expect(t, "REL r1", jvmSlack)
		if _, err := s.AcquireWrite(ctx, "a", w, time.Minute); err != nil {
			t.Fatalf("the dlock writer once the Java reader left: %v", err)
		}
		mustRelease(t, s, "a", w)
		// Readers share with the Java reader when no writer is queued.
		j.send(t, "r1 read %s", rwp("a"))
		j.expect(t, "GOT r1 read", jvmSlack)
		g, err := o.AcquireRead(ctx, "a", r, time.Minute)
		if err != nil || g.Readers != 2 {
			t.Fatalf("a dlock reader beside the Java reader: %+v, %v; want a grant with 2 readers", g, err)
		}
		mustRelease(t, o, "a", r)
		j.send(t, "r1 release")
		j.expect(t, "REL r1", jvmSlack)
	})

	t.Run("DlockWriterKeepsJavaReaderOut", func(t *testing.T) {
		w := tok()
		if _, err := s.AcquireWrite(ctx, "b", w, time.Minute); err != nil {
			t.Fatal(err)
		}
		j.send(t, "r2 read %s", rwp("b"))
		if l, ok := j.quiet(jvmWait); !ok {
			t.Fatalf("the Java reader said %q while a dlock writer held the lock", l)
		}
		mustRelease(t, s, "b", w)
		j.expect(t, "GOT r2 read", jvmSlack)
		j.send(t, "r2 release")
		j.expect(t, "REL r2", jvmSlack)
	})

	t.Run("QueuedJavaWriterKeepsLaterDlockReadersOut", func(t *testing.T) {
		r1, r2 := tok(), tok()
		if _, err := s.AcquireRead(ctx, "c", r1, time.Minute); err != nil {
			t.Fatal(err)
		}
		j.send(t, "w3 write %s", rwp("c"))
		if l, ok := j.quiet(jvmWait); !ok {
			t.Fatalf("the Java writer said %q while a dlock reader held the lock", l)
		}
		_, err := o.AcquireRead(ctx, "c", r2, time.Minute)
		var te *driver.RWTakenError
		if !errors.As(err, &te) || !te.WriterWaiting {
			t.Fatalf("a later dlock reader while a Java writer is queued: %v, want taken with a writer waiting", err)
		}
		mustRelease(t, s, "c", r1)
		j.expect(t, "GOT w3 write", jvmSlack)
		if _, err := o.AcquireRead(ctx, "c", r2, time.Minute); !errors.As(err, &te) || te.Held != driver.RWWrite {
			t.Fatalf("a dlock reader while the Java writer holds: %v, want taken by a writer", err)
		}
		j.send(t, "w3 release")
		j.expect(t, "REL w3", jvmSlack)
		if _, err := o.AcquireRead(ctx, "c", r2, time.Minute); err != nil {
			t.Fatalf("the dlock reader once the Java writer left: %v", err)
		}
		mustRelease(t, o, "c", r2)
	})

	for _, c := range []struct {
		name string
		seq  bool
	}{{"DowngradeKeepsQueuedJavaWriterOut", false}, {"Curator54Downgrade(control)", true}} {
		t.Run(c.name, func(t *testing.T) {
			key, w := "d"+c.name, tok()
			zkstore.SetSequentialDowngrade(s, c.seq)
			t.Cleanup(func() { zkstore.SetSequentialDowngrade(s, false) })
			if _, err := s.AcquireWrite(ctx, key, w, time.Minute); err != nil {
				t.Fatal(err)
			}
			j.send(t, "w4%v write %s", c.seq, rwp(key))
			if l, ok := j.quiet(jvmWait); !ok {
				t.Fatalf("the Java writer said %q while the dlock writer held the lock", l)
			}
			if _, err := s.AcquireRead(ctx, key, w, time.Minute); err != nil {
				t.Fatalf("downgrade: %v", err)
			}
			l, quiet := j.quiet(jvmWait)
			if overlap := !quiet; overlap != c.seq {
				t.Fatalf("after the downgrade the Java writer said %q: overlap %v, want %v", l, overlap, c.seq)
			}
			mustRelease(t, s, key, w)
			if !c.seq {
				j.expect(t, fmt.Sprintf("GOT w4%v write", c.seq), jvmSlack)
			}
			j.send(t, "w4%v release", c.seq)
			j.expect(t, fmt.Sprintf("REL w4%v", c.seq), jvmSlack)
		})
	}
}

// mustRelease releases key's read-write holding of token through s.
func mustRelease(t *testing.T, s *zkstore.Store, key, token string) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.ReleaseRW(c, key, token); err != nil {
		t.Fatalf("ReleaseRW(%q): %v", key, err)
	}
}
