package zkstore

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// minMajor.minMinor is the oldest server line with container nodes (3.5),
// which the layout needs.
const minMajor, minMinor = 3, 5

// Doctor implements driver.Doctor: each server's version and mode (the srvr
// four-letter word, which the server must allow: 4lw.commands.whitelist),
// the ensemble's size and quorum, the session timeout the server granted
// against the one asked and against the lease, and a probe lock taken and
// released. It makes no lasting change.
func (s *Store) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	var checks driver.Report
	s.checkServers(ctx, checks.Add)
	s.checkTimeout(ttl, checks.Add)
	return append(checks, driver.ProbeLock(ctx, s, ttl, "root "+s.root))
}

type addFunc func(string, driver.Status, string, ...any)

// checkServers asks every known server for srvr.
func (s *Store) checkServers(ctx context.Context, add addFunc) {
	servers := s.servers
	if len(servers) == 0 {
		servers = []string{s.conn.Server()}
	}
	var versions []string
	modes := map[string]int{}
	up, old := 0, false
	for _, srv := range servers {
		out, err := fourLetter(ctx, srv, "srvr")
		ver, mode := srvrField(out, "Zookeeper version: "), srvrField(out, "Mode: ")
		if err != nil || ver == "" {
			versions = append(versions, srv+"=unreachable or srvr not allowed")
			continue
		}
		up++
		ver, _, _ = strings.Cut(ver, ",")
		versions = append(versions, srv+"="+ver+" ("+mode+")")
		modes[mode]++
		if ma, mi, ok := majorMinor(ver); ok && (ma < minMajor || ma == minMajor && mi < minMinor) {
			old = true
		}
	}
	switch {
	case up == 0:
		add("version", driver.Warn, "no server answered srvr (allow it with 4lw.commands.whitelist=srvr,mntr,ruok): %s", strings.Join(versions, ", "))
	case old:
		add("version", driver.Fail, "%s: container nodes need ZooKeeper %d.%d or later", strings.Join(versions, ", "), minMajor, minMinor)
	default:
		add("version", driver.OK, "%s", strings.Join(versions, ", "))
	}
	n := len(servers)
	switch {
	case len(s.servers) == 0:
		add("ensemble", driver.Warn, "the servers are unknown (New without Options.Servers): only the connected one was checked")
	case modes["standalone"] > 0:
		add("ensemble", driver.Warn, "a standalone server: when it stops, no lock can be taken, renewed or released")
	case up < n/2+1:
		add("ensemble", driver.Fail, "%d of %d servers answer, %d needed for a quorum", up, n, n/2+1)
	case modes["leader"] != 1:
		add("ensemble", driver.Fail, "%d leaders among %d servers", modes["leader"], n)
	case up < n || n < 3 || n%2 == 0:
		add("ensemble", driver.Warn, "%d of %d servers answer (%d leader); an odd ensemble of 3 or more survives the loss of a minority", up, n, modes["leader"])
	default:
		add("ensemble", driver.OK, "%d servers, one leader, all answer", n)
	}
}

// checkTimeout compares the granted session timeout with the asked one
// and with the lease.
func (s *Store) checkTimeout(ttl time.Duration, add addFunc) {
	got := time.Duration(0)
	if s.neg != nil {
		got, _ = s.neg.Timeout()
	}
	switch {
	case got == 0:
		add("session timeout", driver.Warn, "the granted session timeout is unknown (New without Options.Negotiated): the store counts with %v; if the server grants less (its maxSessionTimeout), the loss of a lock is reported late", s.timeout)
	case s.asked > 0 && got != s.asked:
		add("session timeout", driver.Warn, "asked %v, the server granted %v (its min/maxSessionTimeout); the store counts with %v", s.asked, got, min(got, s.timeout))
	default:
		add("session timeout", driver.OK, "%v, as asked; the store reports a session certain for %v after each confirmed request", got, got-s.margin)
	}
	switch {
	case s.timeout < time.Second:
		add("session vs lease", driver.Warn, "session timeout %v: a pause of the client (GC, a stalled machine) that long loses every lock", s.timeout)
	case ttl > 0 && ttl != s.timeout:
		add("session vs lease", driver.OK, "a lease of %v lasts as long as the session (%v): a crashed holder's locks are freed %v after its last heartbeat", ttl, s.timeout, s.timeout)
	default:
		add("session vs lease", driver.OK, "leases follow the session (%v)", s.timeout)
	}
}

// fourLetter sends a four-letter word to addr and returns the answer.
func fourLetter(ctx context.Context, addr, word string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(c, 64<<10))
	return string(b), err
}

// srvrField returns the rest of the line of out starting with prefix.
func srvrField(out, prefix string) string {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// majorMinor parses "3.8.0-..." as 3, 8; ok false if it cannot.
func majorMinor(ver string) (major, minor int, ok bool) {
	parts := strings.SplitN(ver, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return ma, mi, err1 == nil && err2 == nil
}
