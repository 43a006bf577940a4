package main

import (
	"errors"
	"io"
	"net/url"
)

// writeUnreachableDoctor prints, for doctor --json, the report of a store
// that could not be reached (ExitUnavailable) or refused the user
// (ExitRefused): one FAIL check "connection" with the error and its fix,
// and no model. Other errors (bad usage) print nothing: nothing was checked.
func writeUnreachableDoctor(w io.Writer, sf *storeFlags, err error) {
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != ExitUnavailable && ee.code != ExitRefused {
		return
	}
	c := check{Name: "connection", Status: statusFail, Detail: unprefixed(err),
		Fix: "start the store, or correct the address in --store (or DLOCK_STORE)"}
	if ee.code == ExitRefused {
		c.Fix = "check the user, the password and the user's permissions in the store URL"
	}
	_ = writeJSON(w, doctorReport{Target: targetOf(sf), Safe: false, Checks: []check{c}})
}

// targetOf names the selected store without secrets: its scheme, servers
// and path, without user information or query (a query may hold node URLs
// with passwords).
func targetOf(sf *storeFlags) string {
	raw, err := sf.url()
	if err != nil {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return schemeOf(raw) + " store"
	}
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}
