package main

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	"example.com/dlock/internal/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// server is a single etcd node started from a binary in a temporary
// directory on free loopback ports (internal/etcdserver, the tests' harness).
type server struct {
	c        *etcdserver.Cluster
	dir      string
	Endpoint string // http://127.0.0.1:port
}

// startEtcd starts bin and waits until /health says so. On error the
// temporary directory is removed and the process killed.
func startEtcd(bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "dlockbench-etcd-")
	if err != nil {
		return nil, err
	}
	c, err := etcdserver.Launch(bin, dir, 1)
	if err != nil {
		if c != nil {
			c.Stop()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	return &server{c: c, dir: dir, Endpoint: c.Members[0].ClientURL}, nil
}

// stop kills the server and removes its directory.
func (s *server) stop() {
	s.c.Stop()
	os.RemoveAll(s.dir)
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
