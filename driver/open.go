package driver

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Opened is a store opened from a URL, with what it owns.
type Opened struct {
	// Store is the store. A caller asserts the primitive it needs
	// (o.Store.(Mutex) for dlock.New) and finds capabilities with As.
	Store Store
	// Close releases what the opener created (clients, connections). The
	// store must not be used after it.
	Close func() error
	// Describe names the store for people: its kind and servers, without
	// secrets (no passwords).
	Describe string
}

// Opener opens a store from a URL whose scheme it registered.
type Opener func(ctx context.Context, u *url.URL) (*Opened, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes an opener available for a URL scheme (lower case). Store
// packages call it from init. It panics if the scheme is registered twice
// (in any case) or o is nil, as database/sql.Register does.
func Register(scheme string, o Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	scheme = strings.ToLower(scheme)
	if _, dup := openers[scheme]; dup || o == nil {
		panic("driver: Register called twice or with nil for scheme " + scheme)
	}
	openers[scheme] = o
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Open opens the store a URL names, with the opener registered for its
// scheme (matched in any case). An unparsable URL or an unknown scheme
// returns an error matching ErrInvalid, whose text never holds the URL (it
// may hold a password); other errors are the opener's.
func Open(ctx context.Context, rawURL string) (*Opened, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: store URL: %v", ErrInvalid, redact(err))
	}
	openersMu.RLock()
	o := openers[strings.ToLower(u.Scheme)]
	openersMu.RUnlock()
	if o == nil {
		return nil, fmt.Errorf("%w: store URL: unknown scheme %q (known: %s)", ErrInvalid, u.Scheme, strings.Join(Schemes(), ", "))
	}
	return o(ctx, u)
}

// redact drops the URL from a parse error: it may hold a password.
func redact(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
