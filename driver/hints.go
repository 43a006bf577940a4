package driver

import "context"

// OpenHints are what a caller of Open may ask of a store's opener beyond
// its URL. An Opener takes a context and a URL only, so they travel in the
// context (WithOpenHints); an opener reads them with OpenHintsFrom and
// ignores those that do not apply to it. What the URL says wins.
type OpenHints struct {
	// NoIO asks for a store opened without network I/O, for a caller that
	// needs only what a store knows without its server (Schemer's Schema,
	// the URL's checks): the opener skips what it would do on the server
	// while opening (a ping, a migration asked for in the URL), and the
	// first call that needs the server reaches it. An opener that cannot
	// open without its server (it dials to open) ignores it.
	NoIO bool
	// Conns asks an opener that creates a connection pool to make room in
	// it for Conns calls at once that each hold a connection
	// (RowLocker's transactions), and to keep that many idle between
	// calls, unless the URL sets the pool's size. 0: the opener's default.
	Conns int
}

type openHintsKey struct{}

// WithOpenHints returns a copy of ctx that carries h to the opener that
// Open calls with it.
func WithOpenHints(ctx context.Context, h OpenHints) context.Context {
	return context.WithValue(ctx, openHintsKey{}, h)
}

// OpenHintsFrom returns the hints ctx carries: the zero OpenHints (the
// opener's defaults) if none.
func OpenHintsFrom(ctx context.Context) OpenHints {
	h, _ := ctx.Value(openHintsKey{}).(OpenHints)
	return h
}
