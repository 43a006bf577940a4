package driver

import (
	"fmt"
	"unicode/utf8"
)

// MaxKeyLen is the longest lock key accepted, in bytes.
const MaxKeyLen = 512

// ValidateKey reports whether key is acceptable: non-empty, valid UTF-8 and at
// most MaxKeyLen bytes. The error matches ErrInvalid. The client validates
// every key before it reaches a store; a store that takes keys from
// elsewhere (its own URL, a batch) validates them with it.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes is longer than %d", ErrInvalid, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key is not valid UTF-8", ErrInvalid)
	}
	return nil
}
