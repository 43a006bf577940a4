package redisserver

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{"+OK\r\n", "OK", nil},
		{":42\r\n", "42", nil},
		{"$3\r\nfoo\r\n", "foo", nil},
		{"$0\r\n\r\n", "", nil},
		{"$-1\r\n", "", ErrNil},
		{"*-1\r\n", "", ErrNil},
		{"*0\r\n", "", nil},
		{"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n", "127.0.0.1\n6379", nil},
		{"*3\r\n$-1\r\n-ERR x\r\n*1\r\n:1\r\n", "(nil)\n(error) ERR x\n1", nil},
		{"-ERR boom\r\n", "", ReplyError("ERR boom")},
	}
	for _, tt := range tests {
		got, err := readReply(bufio.NewReader(strings.NewReader(tt.in)), 0)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("readReply(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestReadReplyMalformed(t *testing.T) {
	for _, in := range []string{"?x\r\n", "$x\r\n", "$5\r\nab\r\n", "+OK\n", strings.Repeat("*1\r\n", 20) + ":1\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(in)), 0); err == nil {
			t.Errorf("readReply(%q) succeeded", in)
		}
	}
}

func TestEncodeCommand(t *testing.T) {
	got := string(encodeCommand([]string{"SET", "k", ""}))
	if want := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"; got != want {
		t.Fatalf("encodeCommand = %q, want %q", got, want)
	}
}
