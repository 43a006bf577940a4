package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// server is a single etcd node started from a binary in a temporary
// directory on free loopback ports, as internal/redisserver does for Redis.
type server struct {
	cmd      *exec.Cmd
	dir      string
	Endpoint string // http://127.0.0.1:port
}

// startEtcd starts bin and waits until /health says so (at most 30 s).
// On error the temporary directory is removed and the process killed.
func startEtcd(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "dlockbench-etcd-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(bin, "--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer, "--initial-cluster-state", "new", "--logger", "zap")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{cmd: cmd, dir: dir, Endpoint: client}
	deadline := time.Now().Add(30 * time.Second)
	for !healthy(client) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			s.stop()
			return nil, fmt.Errorf("etcd not healthy within 30 s:\n%s", tail(b, 3000))
		}
		time.Sleep(50 * time.Millisecond) // polling a process we started, with a deadline
	}
	return s, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func healthy(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b [256]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode == http.StatusOK && bytes.Contains(b[:n], []byte(`"health":"true"`))
}

// stop kills the server and removes its directory.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	os.RemoveAll(s.dir)
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// counter counts what an etcd client sends: unary calls (Range, Txn,
// LeaseGrant, LeaseKeepAlive-once streams aside) and messages sent on
// streams (lease keepalives, watch creates and cancels), each a request
// the server answers. It sits outside the client's retry interceptor, so
// a retried call counts once.
type counter struct {
	unary, sends, streams atomic.Int64
}

func (c *counter) total() int64 { return c.unary.Load() + c.sends.Load() }

func (c *counter) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.unary.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.streams.Add(1)
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return countingStream{s, c}, nil
		}),
	}
}

type countingStream struct {
	grpc.ClientStream
	c *counter
}

func (s countingStream) SendMsg(m any) error {
	s.c.sends.Add(1)
	return s.ClientStream.SendMsg(m)
}

// newClient returns an etcd client of endpoint whose requests c counts.
func newClient(endpoint string, c *counter) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), DialOptions: c.dialOptions()})
}
