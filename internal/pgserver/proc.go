package pgserver

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PostgreSQL's children (backends, background workers) each call setsid(),
// so a signal to the postmaster's process group does not reach them. To
// freeze or kill the whole server the postmaster is stopped first (it is
// the only process that forks), then its children are found in /proc and
// signalled one by one.

// children returns the pids whose parent is ppid (Linux /proc).
func children(ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parentOf(pid) == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// parentOf returns pid's parent pid, or -1.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:]) // state, ppid, ...
	if len(f) < 2 {
		return -1
	}
	p, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return p
}

// signalServer sends sig to the postmaster pid and every child of it. For
// SIGCONT the children are continued first, so that the postmaster finds
// them running. Otherwise the postmaster is stopped first and, since a
// signal is delivered asynchronously, its stop awaited, so that it forks
// nothing while its children are signalled; children are then looked up
// again until no new one appears (one forked just before the stop).
func signalServer(pid int, sig syscall.Signal) error {
	if sig == syscall.SIGCONT {
		for _, c := range children(pid) {
			_ = syscall.Kill(c, sig)
		}
		return syscall.Kill(pid, sig)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	waitStopped(pid, 2*time.Second)
	done := map[int]bool{}
	for range 10 {
		fresh := 0
		for _, c := range children(pid) {
			if !done[c] {
				done[c] = true
				fresh++
				_ = syscall.Kill(c, sig)
			}
		}
		if fresh == 0 {
			break
		}
	}
	return syscall.Kill(pid, sig)
}

// waitStopped polls /proc until pid is stopped ('T'), gone, or timeout
// passes.
func waitStopped(pid int, timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] == 'T' || b[i+2] == 'Z' {
			return
		}
	}
}
