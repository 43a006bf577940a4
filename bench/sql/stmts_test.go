package main

import "testing"

// TestStmtParser feeds the parser messages split at every byte boundary:
// it counts PostgreSQL's Query and Execute and MySQL's COM_QUERY and
// COM_STMT_EXECUTE, nothing else.
func TestStmtParser(t *testing.T) {
	pgMsg := func(typ byte, payload string) []byte {
		n := len(payload) + 4
		return append([]byte{typ, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, payload...)
	}
	startup := []byte{0, 0, 0, 9, 0, 3, 0, 0, 0}
	var pg []byte
	pg = append(pg, startup...)
	pg = append(pg, pgMsg('p', "secret\x00")...)
	pg = append(pg, pgMsg('Q', "BEGIN\x00")...)
	pg = append(pg, pgMsg('P', "\x00SELECT 'E'\x00\x00\x00")...)
	pg = append(pg, pgMsg('B', "\x00\x00\x00\x00\x00\x00\x00\x00")...)
	pg = append(pg, pgMsg('E', "\x00\x00\x00\x00\x00")...)
	pg = append(pg, pgMsg('S', "")...)
	myMsg := func(seq byte, payload string) []byte {
		n := len(payload)
		return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
	}
	var my []byte
	my = append(my, myMsg(1, "\x03handshake response")...) // seq 1: not a command
	my = append(my, myMsg(0, "\x03SELECT 1")...)
	my = append(my, myMsg(0, "\x16SELECT ?")...)             // prepare
	my = append(my, myMsg(0, "\x17\x01\x00\x00\x00\x00")...) // execute
	my = append(my, myMsg(0, "\x19\x01\x00\x00\x00")...)     // close
	for _, tc := range []struct {
		name  string
		mysql bool
		in    []byte
		want  int
	}{{"pg", false, pg, 2}, {"mysql", true, my, 2}} {
		for split := 0; split <= len(tc.in); split++ {
			n := 0
			p := stmtParser{mysql: tc.mysql, count: func() { n++ }}
			p.feed(tc.in[:split])
			p.feed(tc.in[split:])
			if n != tc.want {
				t.Fatalf("%s, split at %d: %d statements, want %d", tc.name, split, n, tc.want)
			}
		}
	}
}
