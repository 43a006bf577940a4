package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// runProcs runs j in procs child processes (this program again), started
// together once every one is ready, and merges their results.
func runProcs(j job, procs int) (*result, error) {
	type proc struct {
		cmd *exec.Cmd
		in  interface{ Write([]byte) (int, error) }
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
		j.Proc = i
		spec, _ := json.Marshal(j)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		ps = append(ps, proc{cmd, in, sc})
	}
	for i, p := range ps {
		if !p.out.Scan() || p.out.Text() != "READY" {
			return nil, fmt.Errorf("process %d did not get ready: %q %v", i, p.out.Text(), p.out.Err())
		}
	}
	for _, p := range ps {
		if _, err := p.in.Write([]byte("GO\n")); err != nil {
			return nil, err
		}
	}
	total := &result{}
	for i, p := range ps {
		if !p.out.Scan() {
			return nil, fmt.Errorf("process %d: no result: %v", i, p.out.Err())
		}
		var r result
		if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("process %d: %w", i, err)
		}
		total.merge(&r)
	}
	return total, nil
}
