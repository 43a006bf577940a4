package inventory

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ReadyPrefix starts the line an instance prints on stdout once it serves;
// the rest of the line is its base URL.
const ReadyPrefix = "inventory: serving on "

// Serve serves h on ln until ctx ends, printing the ready line to out
// first; then it shuts down gracefully. It returns the server's error, nil
// after a shutdown caused by ctx.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, out io.Writer) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "%shttp://%s\n", ReadyPrefix, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-errc
	return err
}

// Instance is an inventory service running as a child process (the demo
// re-executes its own binary).
type Instance struct {
	URL  string
	exe  string
	env  []string
	args []string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been reaped
}

// StartInstance runs exe with args (which must make it call Serve) and
// env added to this process's environment, and waits, at most 15 s, for its
// ready line. A process that exits or stays silent is killed and reported
// as an error.
func StartInstance(ctx context.Context, env []string, exe string, args ...string) (*Instance, error) {
	in := &Instance{exe: exe, env: env, args: args}
	return in, in.start(ctx)
}

func (in *Instance) start(ctx context.Context) error {
	cmd := exec.Command(in.exe, in.args...)
	cmd.SysProcAttr = sysProcAttr()
	cmd.Env = append(os.Environ(), in.env...)
	var stderr strings.Builder
	cmd.Stderr = &limited{w: &stderr, n: 4096}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("inventory: start instance: %w", err)
	}
	in.cmd, in.done = cmd, make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		first := ""
		if sc.Scan() {
			first = sc.Text()
		}
		lines <- first
		_, _ = io.Copy(io.Discard, stdout) // keep the pipe drained
	}()
	go func() { _ = cmd.Wait(); close(in.done) }()
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case line := <-lines:
		if u, ok := strings.CutPrefix(line, ReadyPrefix); ok {
			in.URL = u
			return nil
		}
		in.Kill()
		return fmt.Errorf("inventory: instance did not start: %q %s", line, stderr.String())
	case <-t.C:
	case <-ctx.Done():
	}
	in.Kill()
	return errors.Join(errors.New("inventory: instance not ready within 15s"), ctx.Err())
}

// Restart starts a dead instance again on the same port (the same URL).
func (in *Instance) Restart(ctx context.Context) error {
	<-in.done
	host := strings.TrimPrefix(in.URL, "http://")
	_, port, _ := net.SplitHostPort(host)
	args := append([]string{}, in.args...)
	for i := range args {
		if args[i] == "--port" && i+1 < len(args) {
			args[i+1] = port
		}
	}
	in.args = args
	url := in.URL
	if err := in.start(ctx); err != nil {
		return err
	}
	if in.URL != url {
		return fmt.Errorf("inventory: restarted instance moved from %s to %s", url, in.URL)
	}
	return nil
}

// Stop asks the instance to shut down (SIGTERM), kills it after 5 s, and
// waits for it.
func (in *Instance) Stop() {
	if in.cmd == nil || in.cmd.Process == nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(5 * time.Second):
		in.Kill()
	}
}

// Kill SIGKILLs the instance and waits for it.
func (in *Instance) Kill() {
	if in.cmd == nil || in.cmd.Process == nil {
		return
	}
	_ = in.cmd.Process.Kill()
	<-in.done
}

// limited keeps the first n bytes written to it.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
