// Package httprate is a net/http middleware over a dlock.Limiter: one
// request is one unit of a key's budget, the key chosen by a function of
// the request (the client's address by default). A request over the budget
// gets 429 Too Many Requests with Retry-After; every limited response
// carries the RateLimit-Policy and RateLimit fields of the IETF draft
// "RateLimit header fields for HTTP" (draft-ietf-httpapi-ratelimit-headers,
// revision 09: a quota q over a window w, r remaining and t seconds to
// reset).
//
// When the store cannot answer (down, slow past Options.Timeout, refusing)
// the middleware follows Options.OnStoreError: FailOpen (the default) serves
// the request unlimited, FailClosed answers 503 Service Unavailable. The
// default is open because a limiter guards a service's capacity: a store
// outage should not become an outage of every route behind it. Choose
// FailClosed where each request costs something an attacker wants (login
// attempts, messages sent, paid calls).
package httprate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"example.com/dlock"
)

// Policy is what the middleware does with a request when the store cannot
// decide.
type Policy int

const (
	// FailOpen serves the request, unlimited.
	FailOpen Policy = iota
	// FailClosed answers 503 Service Unavailable with Retry-After: 1.
	FailClosed
)

// DefaultTimeout bounds the limiter's decision for one request when
// Options.Timeout is 0.
const DefaultTimeout = 500 * time.Millisecond

// MaxKeyLen is the longest key passed to the limiter as it is; a longer key
// (or one that is not valid UTF-8) is replaced by "sha256:" and its digest,
// so that a client cannot send a key the store refuses or one that costs it
// memory.
const MaxKeyLen = 128

// Options configures a Middleware. The zero value gives the defaults.
type Options struct {
	// Key returns the budget a request draws on. Default: ClientAddr (a
	// budget per client address). An empty key serves the request
	// unlimited, with no RateLimit fields: return one only for requests
	// that must never be limited (a health check).
	Key func(*http.Request) string

	// OnStoreError is what happens to a request when the limiter fails
	// (FailOpen by default: see the package doc).
	OnStoreError Policy

	// Timeout bounds each decision, so that a store that hangs delays
	// requests by at most this much before OnStoreError applies. Default:
	// DefaultTimeout. Negative is invalid.
	Timeout time.Duration

	// PolicyName names the quota policy in the RateLimit fields. Default:
	// "default".
	PolicyName string

	// OnError, if set, is called with each error of the limiter, before
	// OnStoreError applies (for logs and metrics).
	OnError func(r *http.Request, err error)
}

// Middleware limits the requests of the handlers it wraps. It is safe for
// concurrent use.
type Middleware struct {
	lim  *dlock.Limiter
	opts Options
	pol  atomic.Pointer[policyField] // the last RateLimit-Policy value, by limit
}

// policyField is a RateLimit-Policy value and the limit it was made of.
type policyField struct {
	limit dlock.RateLimit
	value string
}

// New returns a Middleware over lim. It returns an error matching
// dlock.ErrInvalid if lim is nil, OnStoreError is unknown, Timeout is
// negative or PolicyName is not a structured-field token.
func New(lim *dlock.Limiter, opts Options) (*Middleware, error) {
	switch {
	case lim == nil:
		return nil, fmt.Errorf("%w: nil limiter", dlock.ErrInvalid)
	case opts.OnStoreError != FailOpen && opts.OnStoreError != FailClosed:
		return nil, fmt.Errorf("%w: unknown store error policy %d", dlock.ErrInvalid, opts.OnStoreError)
	case opts.Timeout < 0:
		return nil, fmt.Errorf("%w: negative timeout %v", dlock.ErrInvalid, opts.Timeout)
	}
	if opts.Key == nil {
		opts.Key = ClientAddr
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.PolicyName == "" {
		opts.PolicyName = "default"
	}
	if !isToken(opts.PolicyName) {
		return nil, fmt.Errorf("%w: policy name %q is not a token (a letter or *, then letters, digits and !#$%%&'*+-.^_`|~:/)", dlock.ErrInvalid, opts.PolicyName)
	}
	return &Middleware{lim: lim, opts: opts}, nil
}

// Handler returns next behind the limit.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := m.opts.Key(r)
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), m.opts.Timeout)
		limit := m.lim.Limit()
		res, err := m.lim.Allow(ctx, boundKey(key))
		cancel()
		if err != nil {
			m.failed(w, r, next, err)
			return
		}
		h := w.Header()
		h["Ratelimit-Policy"] = []string{m.policy(limit)}
		h["Ratelimit"] = []string{m.field(res)}
		if res.Allowed == 0 {
			h.Set("Retry-After", seconds(max(res.RetryAfter, time.Second)))
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// failed applies OnStoreError to a request the limiter could not decide.
func (m *Middleware) failed(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	if m.opts.OnError != nil {
		m.opts.OnError(r, err)
	}
	if m.opts.OnStoreError == FailOpen {
		next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
}

// policy is the RateLimit-Policy value of limit: its burst as the quota
// over the time a full burst takes to come back (the same long-run rate),
// made once per limit.
func (m *Middleware) policy(limit dlock.RateLimit) string {
	if p := m.pol.Load(); p != nil && p.limit == limit {
		return p.value
	}
	w := max(time.Duration(limit.Burst)*limit.Interval(), time.Second)
	b := append([]byte(m.opts.PolicyName), ";q="...)
	b = strconv.AppendInt(b, int64(limit.Burst), 10)
	b = appendSeconds(append(b, ";w="...), w)
	p := &policyField{limit, string(b)}
	m.pol.Store(p)
	return p.value
}

// field is the RateLimit value of res.
func (m *Middleware) field(res dlock.RateResult) string {
	var buf [64]byte
	b := append(append(buf[:0], m.opts.PolicyName...), ";r="...)
	b = strconv.AppendInt(b, int64(res.Remaining), 10)
	return string(appendSeconds(append(b, ";t="...), res.ResetAfter))
}

// appendSeconds appends d in whole seconds, rounded up.
func appendSeconds(b []byte, d time.Duration) []byte {
	return strconv.AppendInt(b, int64((d+time.Second-1)/time.Second), 10)
}

// seconds is d in whole seconds, rounded up.
func seconds(d time.Duration) string { return string(appendSeconds(nil, d)) }

// boundKey returns key, or its digest if it is long or not UTF-8.
func boundKey(key string) string {
	if len(key) <= MaxKeyLen && utf8.ValidString(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ClientAddr is the key of a request's client: the host of its RemoteAddr
// (the peer's address; behind a proxy that is the proxy's, and the key
// should come from the header the proxy sets, with Header).
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Header returns a key function reading the request header name (an API
// key, a user id set by an authenticating proxy), falling back to
// ClientAddr when the header is absent, so that omitting it gives no way
// around the limit.
func Header(name string) func(*http.Request) string {
	return func(r *http.Request) string {
		if v := r.Header.Get(name); v != "" {
			return name + ":" + v
		}
		return ClientAddr(r)
	}
}

// isToken reports whether s is a structured-field token (RFC 8941 3.3.4).
func isToken(s string) bool {
	for i, c := range []byte(s) {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '*':
		case i == 0:
			return false
		case c >= '0' && c <= '9', c == ':' || c == '/':
		case c < 0x80 && c > ' ' && c != '"' && c != '(' && c != ')' && c != ',' && c != ';' && c != '<' && c != '=' && c != '>' && c != '?' && c != '@' && c != '[' && c != '\\' && c != ']' && c != '{' && c != '}':
		default:
			return false
		}
	}
	return s != ""
}
