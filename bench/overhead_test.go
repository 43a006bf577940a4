package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// overheadLibs are the libraries BenchmarkClientOverhead compares.
var overheadLibs = []string{"floor", "dlock", "redislock", "redsync"}

// BenchmarkClientOverhead measures what each library's own code costs the
// client per uncontended lock+unlock, without the network and without
// Redis: go-redis talks to an in-memory responder that answers every
// command at once, in the calling goroutine. What is left is the library
// plus go-redis, CPU-bound and single-threaded, so it is repeatable on a
// noisy machine where the loopback benchmark is not. It tells nothing about
// Redis's side of the cost (two scripts for dlock and redislock, a command
// and a script for the floor and redsync): the srv µs/cycle column of the
// main benchmark does.
//
//	go test -run '^$' -bench ClientOverhead -benchmem -count 8 .
func BenchmarkClientOverhead(b *testing.B) {
	for _, lib := range overheadLibs {
		b.Run(lib, func(b *testing.B) {
			rdb := respClient()
			defer rdb.Close()
			lk, err := newLocker(lib, rdb, defaultTuning)
			if err != nil {
				b.Fatal(err)
			}
			defer lk.close()
			if err := warm(lk); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				unlock, err := lk.lock(ctx, "k")
				if err != nil {
					b.Fatal(err)
				}
				if err := unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRespConnAnswersEveryLibrary runs one lock+unlock of every library
// against the in-memory responder, so that a library whose commands it
// does not answer fails here and not in the middle of a benchmark.
func TestRespConnAnswersEveryLibrary(t *testing.T) {
	for _, lib := range overheadLibs {
		rdb := respClient()
		lk, err := newLocker(lib, rdb, defaultTuning)
		if err != nil {
			t.Fatal(err)
		}
		if err := warm(lk); err != nil {
			t.Errorf("%s: %v", lib, err)
		}
		lk.close()
		_ = rdb.Close()
	}
}

// respClient is a go-redis client whose every connection is a respConn.
func respClient() *redis.Client {
	return redis.NewClient(&redis.Options{Dialer: func(context.Context, string, string) (net.Conn, error) {
		return &respConn{}, nil
	}})
}

// respConn is a net.Conn whose far end is an always-free Redis: every SET
// NX succeeds, every lock script grants, every release script finds the
// lock. It answers commands as they are written, so Read never blocks.
type respConn struct {
	mu      sync.Mutex
	in, out bytes.Buffer
}

// scriptReplies maps a script's SHA1 to its reply, learnt from the source
// when go-redis falls back from EVALSHA to EVAL or loads it.
var scriptReplies sync.Map

func (c *respConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in.Write(p)
	for {
		args, n := parseCommand(c.in.Bytes())
		if n == 0 {
			return len(p), nil
		}
		c.out.WriteString(reply(args))
		c.in.Next(n)
	}
}

func (c *respConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Read(p)
}

func (c *respConn) Close() error                     { return nil }
func (c *respConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *respConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *respConn) SetDeadline(time.Time) error      { return nil }
func (c *respConn) SetReadDeadline(time.Time) error  { return nil }
func (c *respConn) SetWriteDeadline(time.Time) error { return nil }

// parseCommand reads one RESP array of bulk strings from b and returns it
// with its length in bytes, or 0 if b does not hold a whole command yet.
func parseCommand(b []byte) ([]string, int) {
	line := func(at int) (string, int) {
		i := bytes.Index(b[at:], []byte("\r\n"))
		if i < 0 {
			return "", -1
		}
		return string(b[at : at+i]), at + i + 2
	}
	head, at := line(0)
	if at < 0 || head[0] != '*' {
		return nil, 0
	}
	n, _ := strconv.Atoi(head[1:])
	args := make([]string, 0, n)
	for range n {
		var l string
		if l, at = line(at); at < 0 {
			return nil, 0
		}
		size, _ := strconv.Atoi(l[1:])
		if at+size+2 > len(b) {
			return nil, 0
		}
		args = append(args, string(b[at:at+size]))
		at += size + 2
	}
	return args, at
}

const helloReply = "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n" +
	"$2\r\nid\r\n:5\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"

func reply(args []string) string {
	switch strings.ToUpper(args[0]) {
	case "HELLO":
		return helloReply
	case "PING":
		return "+PONG\r\n"
	case "SET", "CLIENT":
		return "+OK\r\n"
	case "SCRIPT": // SCRIPT LOAD src
		sha := learn(args[2])
		return "$40\r\n" + sha + "\r\n"
	case "EVAL":
		learn(args[1])
		r, _ := scriptReplies.Load(sha1hex(args[1]))
		return r.(string)
	case "EVALSHA":
		if r, ok := scriptReplies.Load(args[1]); ok {
			return r.(string)
		}
		return "-NOSCRIPT No matching script.\r\n"
	}
	return "-ERR unknown command '" + args[0] + "'\r\n"
}

// learn records the reply of script src, told from its source: dlock's
// acquire grants with fence 7 and its release leaves no hold, redislock's
// obtain says OK, and every compare-and-delete deletes one key.
func learn(src string) string {
	r := ":1\r\n"
	switch {
	case strings.Contains(src, "-- acquire.lua:"):
		r = ":7\r\n"
	case strings.Contains(src, "-- release.lua:"):
		r = ":0\r\n"
	case strings.Contains(src, "getrange"):
		r = "+OK\r\n"
	}
	sha := sha1hex(src)
	scriptReplies.Store(sha, r)
	return sha
}

func sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
