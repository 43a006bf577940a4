package proc

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Children returns the pids whose parent is ppid, read from /proc (none
// where there is no /proc).
func Children(ppid int) []int {
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
		if f := statFields(pid); len(f) >= 2 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// statFields returns the fields of /proc/pid/stat after the command name
// (state, ppid, ...), or nil.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// SignalTree sends sig to pid and every child of it, for servers whose
// children call setsid() (PostgreSQL's backends), so that a signal to the
// group misses them. For SIGCONT the children are continued first, so that
// the parent finds them running. Otherwise the parent is stopped first and
// its stop awaited, so that it forks nothing while its children are
// signalled; children are then looked up again until no new one appears
// (one forked just before the stop). It returns the error of the signal to
// pid.
func SignalTree(pid int, sig syscall.Signal) error {
	if sig == syscall.SIGCONT {
		for _, c := range Children(pid) {
			_ = syscall.Kill(c, sig)
		}
		return syscall.Kill(pid, sig)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	WaitStopped(pid, 2*time.Second)
	done := map[int]bool{}
	for range 10 {
		fresh := 0
		for _, c := range Children(pid) {
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

// WaitStopped polls /proc until every thread of pid is stopped ('T'), a
// zombie or gone, or timeout passes; where there is no /proc it returns at
// once.
func WaitStopped(pid int, timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		if stopped(pid) {
			return
		}
		time.Sleep(2 * time.Millisecond) // polling /proc, with a deadline
	}
}

// stopped reports whether every thread of pid is stopped, a zombie or gone
// (also when pid or /proc is gone).
func stopped(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return true
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread ended
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		if st := s[i+2]; st != 'T' && st != 't' && st != 'Z' && st != 'X' {
			return false
		}
	}
	return true
}
