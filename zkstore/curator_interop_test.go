package zkstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// curatorJars is the smallest classpath CuratorCounter needs, from Debian's
// libcurator-recipes-java and its dependencies (libcurator-framework-java,
// libcurator-client-java, libzookeeper-java, libguava-java, libslf4j-java).
var curatorJars = []string{
	"curator-recipes.jar", "curator-framework.jar", "curator-client.jar",
	"zookeeper.jar", "zookeeper-jute.jar", "guava.jar", "slf4j-api.jar", "slf4j-nop.jar",
}

const javaDir = "/usr/share/java"

// curatorProgram compiles the Java programs of testdata/curator with javac
// into a temporary directory and returns the classpath to run it with. It
// skips the test when javac, java or a jar is missing, unless CI=true
// (then it fails: scripts/test.sh installs them).
func curatorProgram(t testing.TB) (java, classpath string) {
	t.Helper()
	var missing []string
	javac, err1 := exec.LookPath("javac")
	java, err2 := exec.LookPath("java")
	if err1 != nil || err2 != nil {
		missing = append(missing, "javac/java (default-jdk-headless)")
	}
	cp := []string{t.TempDir()}
	for _, j := range curatorJars {
		p := filepath.Join(javaDir, j)
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
		cp = append(cp, p)
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("missing %s (Debian: default-jdk-headless, libcurator-recipes-java)", strings.Join(missing, ", "))
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
	classpath = strings.Join(cp, ":")
	srcs, err := filepath.Glob(filepath.Join("testdata", "curator", "*.java"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no Java sources in testdata/curator: %v", err)
	}
	out, err := exec.Command(javac, append([]string{"-nowarn", "-d", cp[0], "-cp", classpath}, srcs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return java, classpath
}

// curatorRun is the outcome of one run of CuratorCounter.
type curatorRun struct {
	rounds, waited, overlaps int
	saw                      []string // participant nodes seen before an acquire
}

// startCurator starts CuratorCounter and waits for its READY; done
// receives its result once it exits. The process is killed at the test's
// end if it is still running.
func startCurator(t *testing.T, ctx context.Context, java, cp string, args ...string) <-chan curatorResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, java, append([]string{"-cp", cp, "CuratorCounter"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed once the reader below has waited for the process
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited // one Wait only: the reader's
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "READY" {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		close(exited)
		t.Fatalf("CuratorCounter did not get ready: %q %v", lines.Text(), lines.Err())
	}
	done := make(chan curatorResult, 1)
	go func() {
		var r curatorResult
		for lines.Scan() {
			l := lines.Text()
			switch {
			case strings.HasPrefix(l, "SAW "):
				r.saw = append(r.saw, strings.TrimPrefix(l, "SAW "))
			case strings.HasPrefix(l, "DONE "):
				_, r.err = fmt.Sscanf(l, "DONE rounds=%d waited=%d overlaps=%d", &r.rounds, &r.waited, &r.overlaps)
			default:
				r.err = errors.Join(r.err, fmt.Errorf("CuratorCounter: %s", l))
			}
		}
		if err := cmd.Wait(); err != nil {
			r.err = errors.Join(r.err, fmt.Errorf("CuratorCounter: %w", err))
		}
		close(exited)
		done <- r
	}()
	return done
}

type curatorResult struct {
	curatorRun
	err error
}

// rmw is the Go side's critical section, the same as CuratorCounter's: the
// ephemeral marker (NodeExists: an overlap), read the counter znode, wait
// gap, write it + 1 unconditionally.
func rmw(conn *zk.Conn, counter, marker string, gap time.Duration) (overlap bool, err error) {
	if _, err := conn.Create(marker, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); errors.Is(err, zk.ErrNodeExists) {
		overlap = true
	} else if err != nil {
		return false, err
	}
	b, _, err := conn.Get(counter)
	if err != nil {
		return overlap, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return overlap, err
	}
	time.Sleep(gap) // the critical section's work: the window a lost update needs
	if _, err := conn.Set(counter, []byte(strconv.Itoa(n+1)), -1); err != nil {
		return overlap, err
	}
	if err := conn.Delete(marker, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return overlap, err
	}
	return overlap, nil
}

// A Curator InterProcessMutex in a JVM (Debian's Curator 5.4.0, compiled
// here with javac) and a dlock Client on this store contend for one lock
// path, each doing 20 read-modify-writes of a counter znode with a 20 ms
// gap. Invariants: no lost update (the counter is the sum of both sides'
// rounds), no overlap (an ephemeral marker), each side waited for the other
// at least once (Curator found participants before its acquire; the dlock
// side found the path held before its Do), and Curator's
// getParticipantNodes listed a node the dlock side held. Negative control:
// the dlock side not locking loses updates or overlaps.
func TestCuratorInterop(t *testing.T) {
	java, cp := curatorProgram(t)
	srv := server(t).Addrs() // the package's shared standalone server
	for _, locked := range []bool{true, false} {
		t.Run(fmt.Sprintf("locked=%v", locked), func(t *testing.T) { curatorInterop(t, srv, java, cp, locked, "") })
	}
	// Both sides authenticated as one digest user, every node with the
	// creator-only ACL (dlock: Options.Auth and ACL, as zk://user:pw@...?acl=creator
	// sets them; Curator: authorization and an ACLProvider): they still
	// exclude each other, and a session without the credentials cannot
	// read the lock nodes.
	t.Run("locked=true,digest", func(t *testing.T) { curatorInterop(t, srv, java, cp, true, "app:secret") })
}

func curatorInterop(t *testing.T, addrs []string, java, cp string, locked bool, digest string) {
	const rounds, gap = 20, 20 * time.Millisecond
	root := testPath(t)
	conn := dialRaw(t, addrs, faultTimeout)
	sec := interopSection{conn: conn, anon: conn, counter: root + "/counter", marker: root + "/inside", lockPath: root + "/locks/ctr", gap: gap}
	makeParents(t, conn, root+"/locks")
	if _, err := conn.Create(sec.counter, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	opts := zkstore.Options{Root: root + "/locks", SessionTimeout: faultTimeout}
	args := []string{strings.Join(addrs, ","), sec.lockPath, sec.counter, sec.marker, strconv.Itoa(rounds), strconv.Itoa(int(gap / time.Millisecond))}
	if digest != "" {
		opts.Auth, opts.ACL = []zkstore.Auth{{Scheme: "digest", Secret: []byte(digest)}}, zk.AuthACL(zk.PermAll)
		args = append(args, digest)
		// The test's own session lists the lock path: it needs the user's
		// credentials; a second session without them checks the ACLs.
		if err := conn.AddAuth("digest", []byte(digest)); err != nil {
			t.Fatal(err)
		}
		sec.anon = dialRaw(t, addrs, faultTimeout)
	}
	dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	s, err := zkstore.Dial(dctx, addrs, opts)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	dc := newFaultClient(t, s, faultTimeout)
	ctx := testCtx(t, 120*time.Second)
	curator := startCurator(t, ctx, java, cp, args...)
	var d dlockSide
	var cr curatorResult
	if locked {
		d = sec.lockedRounds(t, ctx, dc, rounds)
		cr = <-curator
	} else {
		d, cr = sec.unlockedRounds(t, curator, 50*rounds)
	}
	if cr.err != nil {
		t.Fatal(cr.err)
	}
	b, _, err := conn.Get(sec.counter)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := strconv.Atoi(string(b))
	common := 0
	for _, s := range cr.saw {
		if slices.Contains(d.held, s) {
			common++
		}
	}
	want, overlaps := cr.rounds+d.rounds, d.overlaps+cr.overlaps
	t.Logf("RESULT counter %d after %d Curator + %d dlock rounds (%d updates lost); overlaps: dlock %d, Curator %d; Curator waited %d times, dlock %d; Curator saw %d participant nodes, %d of them dlock's",
		got, cr.rounds, d.rounds, want-got, d.overlaps, cr.overlaps, cr.waited, d.waited, len(cr.saw), common)
	switch {
	case !locked:
		if got == want && overlaps == 0 {
			t.Fatal("negative control: no lost update and no overlap without the lock; the test cannot see one")
		}
	case got != want || overlaps != 0:
		t.Fatalf("counter %d, want %d; %d overlaps", got, want, overlaps)
	case cr.waited == 0 || d.waited == 0:
		t.Fatalf("the two sides did not both wait: Curator waited %d times, dlock %d", cr.waited, d.waited)
	case common == 0:
		t.Fatalf("Curator's getParticipantNodes never listed a dlock node: saw %v, dlock held %v", cr.saw, d.held)
	case (digest != "") != (d.private == 2):
		// With the digest user both sides' nodes are private to it: the
		// test's own session, without the credentials, can read neither
		// (with the open ACL it reads both).
		t.Fatalf("with digest %q, %d of the 2 queued lock nodes (dlock's, Curator's) were unreadable without credentials", digest, d.private)
	}
}

// interopSection is the shared state of the interop test: the counter,
// the overlap marker and the lock path, and the section's gap.
type interopSection struct {
	conn                      *zk.Conn
	anon                      *zk.Conn // a session without the credentials (conn itself when there are none)
	counter, marker, lockPath string
	gap                       time.Duration
}

// dlockSide is what the dlock side did.
type dlockSide struct {
	rounds, overlaps, waited int
	held                     []string // our lock nodes, seen while holding
	private                  int      // of the two queued nodes of the first round, those the test's session could not read (ErrNoAuth)
}

// lockedRounds runs rounds sections under dc's lock on "ctr" (the lock
// path), counting the rounds that found the path held or queued for (ours
// then waits behind Curator) and recording our node while we hold it. The
// first round holds until Curator has queued behind it.
func (sec interopSection) lockedRounds(t *testing.T, ctx context.Context, dc *dlock.Client, rounds int) dlockSide {
	var d dlockSide
	for i := range rounds {
		if kids, _, err := sec.conn.Children(sec.lockPath); err == nil && len(kids) > 0 {
			d.waited++
		}
		var over bool
		err := dc.Do(ctx, "ctr", func(ctx context.Context) error {
			kids, _, err := sec.conn.Children(sec.lockPath)
			if err != nil {
				return err
			}
			d.held = append(d.held, sec.lockPath+"/"+curatorOrder(kids)[0])
			if i == 0 {
				var queued []string
				pollUntil(t, 30*time.Second, "Curator queued", func() bool {
					k, _, err := sec.conn.Children(sec.lockPath)
					queued = k
					return err == nil && len(k) > 1
				})
				for _, k := range queued {
					if _, _, err := sec.anon.Get(sec.lockPath + "/" + k); errors.Is(err, zk.ErrNoAuth) {
						d.private++
					}
				}
			}
			over, err = rmw(sec.conn, sec.counter, sec.marker, sec.gap)
			return err
		})
		if err != nil {
			t.Fatalf("dlock side, round %d: %v", i, err)
		}
		if over {
			d.overlaps++
		}
		d.rounds++
	}
	return d
}

// unlockedRounds is the negative control: sections without the lock until
// Curator is done (at most limit).
func (sec interopSection) unlockedRounds(t *testing.T, curator <-chan curatorResult, limit int) (dlockSide, curatorResult) {
	var d dlockSide
	for range limit {
		select {
		case cr := <-curator:
			return d, cr
		default:
		}
		over, err := rmw(sec.conn, sec.counter, sec.marker, sec.gap)
		if err != nil {
			t.Fatalf("unlocked side, round %d: %v", d.rounds, err)
		}
		if over {
			d.overlaps++
		}
		d.rounds++
	}
	return d, <-curator
}

// curatorOrder sorts lock children as Curator does: by the text after the
// last "lock-" (the whole name when there is none), compared as strings.
func curatorOrder(kids []string) []string {
	key := func(s string) string {
		if i := strings.LastIndex(s, "lock-"); i >= 0 {
			return s[i+len("lock-"):]
		}
		return s
	}
	out := slices.Clone(kids)
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(key(a), key(b)) })
	return out
}
