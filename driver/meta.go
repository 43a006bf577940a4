package driver

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMetaLen is the longest holder metadata accepted, in bytes.
const MaxMetaLen = 256

// metaKey is the context key of WithMeta's value.
type metaKey struct{}

// WithMeta returns a copy of ctx that carries meta, the holder metadata of
// the holding an Acquire (or AcquireQueued, AcquireQueuedRead, or Apply of
// an Acquire step) with that ctx starts: a short text saying who holds the
// key (host, process, program), shown by Inspect and List as Info.Meta.
// The client calls it with its WithMeta option's value, already checked
// with ValidateMeta, and only for a store that is a MetaKeeper. An empty
// meta returns ctx unchanged.
func WithMeta(ctx context.Context, meta string) context.Context {
	if meta == "" {
		return ctx
	}
	return context.WithValue(ctx, metaKey{}, meta)
}

// MetaFrom returns the holder metadata ctx carries (WithMeta), or "" if it
// carries none or none that ValidateMeta accepts: a store may write what it
// returns as it is.
func MetaFrom(ctx context.Context) string {
	m, _ := ctx.Value(metaKey{}).(string)
	if m != "" && ValidateMeta(m) != nil {
		return ""
	}
	return m
}

// ValidateMeta reports whether meta is acceptable as holder metadata: at
// most MaxMetaLen bytes of valid UTF-8 without control characters (so that
// one holder is one line of dlock status). The error matches ErrInvalid.
func ValidateMeta(meta string) error {
	switch {
	case len(meta) > MaxMetaLen:
		return fmt.Errorf("%w: holder metadata of %d bytes is longer than %d", ErrInvalid, len(meta), MaxMetaLen)
	case !utf8.ValidString(meta):
		return fmt.Errorf("%w: holder metadata is not valid UTF-8", ErrInvalid)
	case strings.ContainsFunc(meta, unicode.IsControl):
		return fmt.Errorf("%w: holder metadata contains a control character", ErrInvalid)
	}
	return nil
}

// MetaKeeper is a store that keeps holder metadata: an Acquire (or
// AcquireQueued, AcquireQueuedRead, Apply of an Acquire step) whose ctx
// carries metadata (MetaFrom) records it with the holding it starts, and
// Inspect and List return it as Info.Meta while that holding lasts. A
// re-entry (whatever metadata its ctx carries), an extension and a partial
// release keep the metadata the holding started with; a holding started
// without metadata reports none. Whether a Transferer's transfer keeps it
// is the store's to document. KeepsMeta does no I/O.
//
// Absent: the client passes no metadata, and Info.Meta is empty.
type MetaKeeper interface {
	// KeepsMeta reports whether the store keeps metadata; a wrapper that
	// keeps it only for some stores it wraps returns false for the others.
	KeepsMeta() bool
}
