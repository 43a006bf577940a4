package dlock

import (
	"time"

	"example.com/dlock/driver"
)

// defaultTTL is the lease used when no TTL is given on a store with model
// m: DefaultLease, raised to the store's MinTTL and lowered to its MaxTTL.
func defaultTTL(m driver.Model) time.Duration {
	ttl := max(DefaultLease, m.MinTTL)
	if m.MaxTTL > 0 {
		ttl = min(ttl, m.MaxTTL)
	}
	return ttl
}

// fitModel checks *ttl, already within the client's own limits (MinTTL,
// MaxTTL), against the store's model m and replaces it with the lease length
// the client uses (m.TTLFor): the session's TTL on a session-based store,
// else *ttl rounded up to the store's granularity. A ttl outside a per-key
// store's bounds returns an error matching ErrInvalid that names them, and
// leaves *ttl unchanged.
func fitModel(m driver.Model, ttl *time.Duration) error {
	if m.Session && m.SessionTTL > 0 {
		*ttl = m.SessionTTL
		return nil
	}
	if *ttl < m.MinTTL || (m.MaxTTL > 0 && *ttl > m.MaxTTL) {
		return invalidf("ttl %v is outside the store's bounds [%v, %s]", *ttl, m.MinTTL, maxText(m.MaxTTL))
	}
	t := m.TTLFor(*ttl)
	if m.MaxTTL > 0 && t > m.MaxTTL {
		return invalidf("ttl %v rounded up to the store's granularity %v is %v, above the store's maximum %v", *ttl, m.Granularity, t, m.MaxTTL)
	}
	*ttl = t
	return nil
}

func maxText(d time.Duration) string {
	if d <= 0 {
		return "no maximum"
	}
	return d.String()
}
