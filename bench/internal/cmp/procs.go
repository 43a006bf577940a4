package cmp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// RunFn runs job j in this process: it sets up, calls ready, waits for
// gate to close, and runs.
type RunFn[J, R any] func(j J, ready func(), gate <-chan struct{}) (*R, error)

// ServeChild makes this process a child if $env holds a job: it runs the
// job with run (Child) and exits with its status. Otherwise it returns.
// Call it first in main and in TestMain.
func ServeChild[J, R any](env string, run RunFn[J, R]) {
	if spec := os.Getenv(env); spec != "" {
		os.Exit(Child(spec, run))
	}
}

// Child runs the job in spec (JSON): it prints READY, waits for a line on
// stdin, runs, and prints the result as JSON. It returns the exit status:
// 0, or 2 after writing the error to stderr.
func Child[J, R any](spec string, run RunFn[J, R]) int {
	var j J
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	gate := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(gate)
	}()
	res, err := run(j, func() { fmt.Println("READY") }, gate)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 2
	}
	return 0
}

// RunProcs runs job(i) for i in [0, procs) each in a child process (this
// program again, the job in $env), starts them together once every one is
// ready (ready, if not nil, is called then, before they start), and hands
// their results to merge in order. Every child is killed and waited for on
// return; a child that does not get ready or gives no result is an error.
func RunProcs[J, R any](env string, procs int, job func(i int) J, ready func(), merge func(*R)) error {
	type proc struct {
		cmd *exec.Cmd
		in  io.Writer
		out *bufio.Scanner
	}
	var ps []proc
	defer func() {
		for _, p := range ps {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}()
	for i := range procs {
		spec, err := json.Marshal(job(i))
		if err != nil {
			return err
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), env+"="+string(spec))
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		ps = append(ps, proc{cmd, in, sc})
	}
	for i, p := range ps {
		if !p.out.Scan() || p.out.Text() != "READY" {
			return fmt.Errorf("process %d did not get ready: %q %v", i, p.out.Text(), p.out.Err())
		}
	}
	if ready != nil {
		ready()
	}
	for _, p := range ps {
		if _, err := p.in.Write([]byte("GO\n")); err != nil {
			return err
		}
	}
	for i, p := range ps {
		if !p.out.Scan() {
			return fmt.Errorf("process %d: no result: %v", i, p.out.Err())
		}
		var r R
		if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
			return fmt.Errorf("process %d: %w", i, err)
		}
		merge(&r)
	}
	return nil
}
