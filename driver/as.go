package driver

// Unwrapper is implemented by a store that wraps another (a fault injector,
// a metrics decorator). As looks through it, so that a wrapper need not copy
// every capability of the store it wraps. A wrapper that must intercept a
// capability implements that capability itself: As finds the outermost one.
type Unwrapper interface {
	// Unwrap returns the wrapped store, or nil.
	Unwrap() Store
}

// mutexUnwrapper is the Unwrapper of a wrapper written before Store
// existed (Unwrap returned a Mutex); As still looks through it.
type mutexUnwrapper interface {
	Unwrap() Mutex
}

// As finds the capability T in s or, if s does not have it, in the stores
// s wraps (through Unwrapper), outermost first. It reports false when no
// store in the chain has it.
//
// Note that a capability found in a wrapped store bypasses the wrapper: a
// wrapper that changes Acquire, Extend or Release semantics must also
// implement (or deliberately hide, by implementing Unwrap to return nil) the
// capabilities whose behaviour depends on them.
//
// As works on any primitive's store. It also looks through a wrapper whose
// Unwrap returns a Mutex (the Unwrapper of earlier versions).
func As[T any](s Store) (T, bool) {
	for depth := 0; s != nil && depth < 64; depth++ {
		if c, ok := s.(T); ok {
			return c, true
		}
		switch u := s.(type) {
		case Unwrapper:
			s = u.Unwrap()
		case mutexUnwrapper:
			s = u.Unwrap()
		default:
			s = nil
		}
	}
	var zero T
	return zero, false
}
