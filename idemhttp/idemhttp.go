// Package idemhttp is net/http middleware that makes requests idempotent
// with the Idempotency-Key header (the IETF httpapi draft, -07), on a
// dlock.Guard: the first request of a key runs the handler and its response
// is stored; a later request of the key gets that response back byte for
// byte (status, the stored headers, body), marked Idempotent-Replayed:
// true; a request while the first is still running gets 409 (or, on a
// Guard made WithWait(d), waits up to d for its response); the same key
// with another request (method, path and query, body) gets 422; a missing
// (when Options.Required) or malformed key gets 400. Handlers on several
// instances sharing the Guard's store run once per key. Every guarded
// response carries Idempotency-Key-Retention: the seconds a response is
// kept.
//
// Rules of this package, stated once:
//
//   - Only the methods in Options.Methods are guarded (POST and PATCH by
//     default); other requests, and requests without the header when it is
//     not required, go to the handler as they are.
//   - The header is a structured-field string: a quoted string of
//     printable ASCII, 1 to 255 characters, in one field line.
//   - Keys are scoped per client by Options.Scope (by default every client
//     shares one key space: set it to the authenticated client's id).
//   - The whole response is buffered: the handler cannot stream.
//   - Responses with a 5xx status are sent but not stored, and a response
//     over driver.MaxResultLen (encoded) is sent but not stored: a retry
//     runs the handler again. A handler that panics stores nothing.
//   - A store that does not answer gives 503; the handler did not run.
//
// The handler finds its dlock.Execution (for DownstreamKey) with
// ExecutionFrom.
package idemhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"example.com/dlock"
)

// Header names this package reads and writes.
const (
	KeyHeader       = "Idempotency-Key"
	ReplayedHeader  = "Idempotent-Replayed"
	RetentionHeader = "Idempotency-Key-Retention"
)

// MaxKeyLen is the longest Idempotency-Key accepted, in characters (as
// Stripe's).
const MaxKeyLen = 255

// Options configures the middleware. The zero value (or nil) gives the
// defaults.
type Options struct {
	// Required refuses a guarded request without the header with 400.
	// Default: such requests go to the handler unguarded.
	Required bool
	// Methods are the guarded methods. Default: POST and PATCH.
	Methods []string
	// Scope returns the scope of a request's key: the client's identity.
	// Default: "" for every request.
	Scope func(*http.Request) string
	// Headers are the response headers stored and replayed. Default:
	// Content-Type, Location, ETag, Last-Modified.
	Headers []string
	// MaxBody bounds the request body read for the fingerprint, in bytes;
	// a longer one gets 413. Default: 1 MiB.
	MaxBody int64
}

type middleware struct {
	guard     *dlock.Guard
	next      http.Handler
	required  bool
	methods   map[string]bool
	scope     func(*http.Request) string
	headers   []string
	maxBody   int64
	retention string
}

// New returns the middleware of guard with opts. It returns an error if
// guard is nil or opts.MaxBody is negative.
func New(guard *dlock.Guard, opts *Options) (func(http.Handler) http.Handler, error) {
	if guard == nil {
		return nil, fmt.Errorf("%w: nil guard", dlock.ErrInvalid)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxBody < 0 {
		return nil, fmt.Errorf("%w: negative MaxBody", dlock.ErrInvalid)
	}
	m := middleware{guard: guard, required: o.Required, scope: o.Scope, maxBody: o.MaxBody, methods: map[string]bool{}}
	if len(o.Methods) == 0 {
		o.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	for _, meth := range o.Methods {
		m.methods[meth] = true
	}
	if o.Headers == nil {
		o.Headers = []string{"Content-Type", "Location", "ETag", "Last-Modified"}
	}
	for _, h := range o.Headers {
		m.headers = append(m.headers, http.CanonicalHeaderKey(h))
	}
	if m.maxBody == 0 {
		m.maxBody = 1 << 20
	}
	m.retention = strconv.FormatInt(int64(math.Ceil(guard.Retention().Seconds())), 10)
	return func(next http.Handler) http.Handler {
		mm := m
		mm.next = next
		return &mm
	}, nil
}

type execKey struct{}

// ExecutionFrom returns the execution a guarded handler runs as (its
// DownstreamKey for calls that must not run twice), and false outside the
// middleware or when the request was not guarded.
func ExecutionFrom(ctx context.Context) (dlock.Execution, bool) {
	e, ok := ctx.Value(execKey{}).(dlock.Execution)
	return e, ok
}

// unstored carries a response that is sent but not stored.
type unstored struct{ rec *recorder }

func (u *unstored) Error() string { return "response not stored" }

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	vals := r.Header.Values(KeyHeader)
	if !m.methods[r.Method] || (len(vals) == 0 && !m.required) {
		m.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set(RetentionHeader, m.retention)
	key, err := parseKey(vals)
	if err != nil {
		problem(w, http.StatusBadRequest, "invalid Idempotency-Key", err.Error())
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.maxBody+1))
	if err != nil || int64(len(body)) > m.maxBody {
		problem(w, http.StatusRequestEntityTooLarge, "request body too large or unreadable", fmt.Sprintf("the body is read whole, up to %d bytes", m.maxBody))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	g := m.guard
	if m.scope != nil {
		g = g.Scope(m.scope(r))
	}
	res, err := g.Do(r.Context(), key, fingerprint(r, body), func(ctx context.Context, e dlock.Execution) ([]byte, error) {
		rec := newRecorder()
		m.next.ServeHTTP(rec, r.WithContext(context.WithValue(ctx, execKey{}, e)))
		if rec.code() >= 500 {
			return nil, &unstored{rec}
		}
		return rec.encode(m.headers), nil
	})
	m.answer(w, res, err)
}

// answer sends Do's outcome: the response (stored, replayed or not
// storable) or the problem that kept the handler from running.
func (m *middleware) answer(w http.ResponseWriter, res dlock.Result, err error) {
	var u *unstored
	var ife *dlock.InFlightError
	switch {
	case errors.As(err, &u):
		u.rec.sendTo(w)
		return
	case errors.As(err, &ife):
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(ife.Remaining.Seconds())))))
		problem(w, http.StatusConflict, "a request with this Idempotency-Key is being processed", "retry later to get its response")
		return
	case errors.Is(err, dlock.ErrMismatch):
		problem(w, http.StatusUnprocessableEntity, "Idempotency-Key reused for another request", "a key names one request: method, path and body")
		return
	case errors.Is(err, dlock.ErrInvalid) && res.Value == nil:
		problem(w, http.StatusBadRequest, "invalid Idempotency-Key", err.Error())
		return
	case err != nil && res.Value == nil:
		problem(w, http.StatusServiceUnavailable, "the idempotency store is unavailable", "the request was not processed; retry with the same key")
		return
	}
	// Stored, replayed, or run but not stored (too large, taken over,
	// completion unanswered): the response the handler made.
	stored, derr := decode(res.Value)
	if derr != nil {
		problem(w, http.StatusInternalServerError, "stored response unreadable", derr.Error())
		return
	}
	h := w.Header()
	for k, v := range stored.header {
		h[k] = v
	}
	if res.Replayed {
		h.Set(ReplayedHeader, "true")
	}
	w.WriteHeader(stored.status)
	_, _ = w.Write(stored.body)
}

// fingerprint is the request's digest: method, path and query, body.
func fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	for _, s := range []string{r.Method, r.URL.RequestURI()} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// parseKey reads the one Idempotency-Key field line as a structured-field
// string (RFC 8941 §3.3.3) of 1 to MaxKeyLen characters.
func parseKey(vals []string) (string, error) {
	switch {
	case len(vals) == 0:
		return "", errors.New("the Idempotency-Key header is required")
	case len(vals) > 1:
		return "", errors.New("more than one Idempotency-Key field line")
	}
	v := strings.Trim(vals[0], " \t")
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", errors.New(`Idempotency-Key must be a structured-field string: "..."`)
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		switch {
		case c == '\\':
			if i++; i == len(v)-1 || (v[i] != '"' && v[i] != '\\') {
				return "", errors.New(`Idempotency-Key: a backslash escapes only " and \`)
			}
			c = v[i]
		case c == '"':
			return "", errors.New(`Idempotency-Key: an unescaped " inside the string`)
		case c < 0x20 || c > 0x7e:
			return "", errors.New("Idempotency-Key: only printable ASCII")
		}
		b.WriteByte(c)
	}
	if b.Len() == 0 || b.Len() > MaxKeyLen {
		return "", fmt.Errorf("Idempotency-Key of %d characters: want 1 to %d", b.Len(), MaxKeyLen)
	}
	return b.String(), nil
}

// problem answers with an RFC 9457 problem document.
func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{title, status, detail})
}
