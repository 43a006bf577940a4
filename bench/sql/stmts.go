package main

// stmtParser follows the messages a client writes on one connection and
// counts the statements among them: on PostgreSQL a simple query ('Q') or
// an Execute ('E') of the extended protocol; on MySQL/MariaDB a command
// packet (sequence 0) that is COM_QUERY or COM_STMT_EXECUTE. Prepares,
// syncs, closes and authentication are not statements.
type stmtParser struct {
	mysql   bool
	started bool   // PostgreSQL: the startup message (no type byte) is past
	hdr     []byte // the header read so far
	skip    int    // payload bytes of the current message still to pass
	count   func()
}

func (p *stmtParser) feed(b []byte) {
	for len(b) > 0 {
		if p.skip > 0 {
			n := min(p.skip, len(b))
			p.skip -= n
			b = b[n:]
			continue
		}
		need := p.headerLen()
		n := min(need-len(p.hdr), len(b))
		p.hdr = append(p.hdr, b[:n]...)
		b = b[n:]
		if len(p.hdr) == need {
			p.message()
			p.hdr = p.hdr[:0]
		}
	}
}

// headerLen is how many bytes p reads before it knows a message's length
// and kind.
func (p *stmtParser) headerLen() int {
	switch {
	case p.mysql:
		return 5 // length (3), sequence (1), first payload byte (the command)
	case !p.started:
		return 4 // startup, SSL or cancel request: length only
	default:
		return 5 // type (1), length (4)
	}
}

func (p *stmtParser) message() {
	h := p.hdr
	switch {
	case p.mysql:
		length := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
		if h[3] == 0 && (h[4] == 0x03 || h[4] == 0x17) {
			p.count()
		}
		p.skip = length - 1
	case !p.started:
		p.started = true
		p.skip = int(uint32(h[0])<<24|uint32(h[1])<<16|uint32(h[2])<<8|uint32(h[3])) - 4
	default:
		if h[0] == 'Q' || h[0] == 'E' {
			p.count()
		}
		p.skip = int(uint32(h[1])<<24|uint32(h[2])<<16|uint32(h[3])<<8|uint32(h[4])) - 4
	}
	p.skip = max(p.skip, 0)
}
