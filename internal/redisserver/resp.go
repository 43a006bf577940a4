package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// DefaultDoTimeout bounds a Do call (dial, write and read).
const DefaultDoTimeout = 5 * time.Second

// ErrNil is returned by Do and DoContext when the reply is a RESP nil (for
// example GET on a missing key).
var ErrNil = errors.New("redisserver: nil reply")

// ReplyError is a RESP error reply such as "ERR unknown command" or
// "LOADING Redis is loading the dataset in memory". Do returns it wrapped;
// use errors.As to inspect it.
type ReplyError string

// Error returns the error message sent by the server.
func (e ReplyError) Error() string { return string(e) }

// Do sends one command to the server over a fresh TCP connection and returns
// a textual rendering of the reply, bounded by DefaultDoTimeout. It works
// even when the Server is not running (the dial then fails). See DoContext
// for the rendering and the errors.
func (s *Server) Do(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultDoTimeout)
	defer cancel()
	return s.DoContext(ctx, args...)
}

// DoContext is Do bounded by ctx. The reply is rendered as text: simple
// strings, bulk strings and integers as their value; arrays as their
// rendered elements joined by "\n" (nested arrays are flattened, nil elements
// render as "(nil)", error elements as "(error) msg"). A top-level nil reply
// returns ErrNil; an error reply returns a wrapped ReplyError; network
// failures return the wrapped net error (for example one matching
// syscall.ECONNREFUSED), and expiry of ctx returns an error matching
// ctx.Err().
func (s *Server) DoContext(ctx context.Context, args ...string) (string, error) {
	return do(ctx, s.Addr(), args...)
}

// do runs one command against addr on a new connection.
func do(ctx context.Context, addr string, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("redisserver: Do needs a command")
	}
	fail := func(err error) (string, error) {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("redisserver: %s %s: %w", addr, args[0], err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(encodeCommand(args)); err != nil {
		return fail(err)
	}
	reply, err := readReply(bufio.NewReader(conn), 0)
	var re ReplyError
	switch {
	case errors.As(err, &re), errors.Is(err, ErrNil):
		return "", fmt.Errorf("redisserver: %s %s: %w", addr, args[0], err)
	case err != nil:
		return fail(err)
	}
	return reply, nil
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return []byte(b.String())
}

// maxDepth bounds array nesting so a malformed reply cannot recurse forever.
const maxDepth = 16

// readReply reads one RESP2 reply and renders it as described on DoContext.
// Nil replies return ErrNil and error replies a ReplyError.
func readReply(r *bufio.Reader, depth int) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+', ':':
		return body, nil
	case '-':
		return "", ReplyError(body)
	case '$':
		return readBulk(r, body)
	case '*':
		return readArray(r, body, depth)
	}
	return "", fmt.Errorf("unsupported reply type %q", kind)
}

func readBulk(r *bufio.Reader, size string) (string, error) {
	n, err := strconv.Atoi(size)
	switch {
	case err != nil:
		return "", fmt.Errorf("bad bulk length %q: %w", size, err)
	case n < 0:
		return "", ErrNil
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func readArray(r *bufio.Reader, size string, depth int) (string, error) {
	n, err := strconv.Atoi(size)
	switch {
	case err != nil:
		return "", fmt.Errorf("bad array length %q: %w", size, err)
	case n < 0:
		return "", ErrNil
	case depth >= maxDepth:
		return "", errors.New("reply nested too deeply")
	}
	parts := make([]string, 0, n)
	for range n {
		v, err := readReply(r, depth+1)
		var re ReplyError
		switch {
		case errors.Is(err, ErrNil):
			v = "(nil)"
		case errors.As(err, &re):
			v = "(error) " + string(re)
		case err != nil:
			return "", err
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, "\n"), nil
}
