// Package extendbatch splits a driver.BatchExtender's requests for a store
// that extends many holdings in one statement (the SQL lease tables): the
// requests the statement takes, and those a single Extend answers after it.
package extendbatch

import "example.com/dlock/driver"

// Split checks each request with check, whose error becomes the request's
// result in out. It returns the indexes of the first valid request of each
// key and token (batched: the statement extends them) and of the repeats
// (rest: answered by Extend after the statement, in order, so that the last
// one sets the expiry as a series of Extends would).
func Split(reqs []driver.ExtendRequest, out []driver.ExtendResult, check func(driver.ExtendRequest) error) (batched, rest []int) {
	seen := make(map[[2]string]bool, len(reqs))
	for i, r := range reqs {
		if err := check(r); err != nil {
			out[i].Err = err
			continue
		}
		k := [2]string{r.Key, r.Token}
		if seen[k] {
			rest = append(rest, i)
			continue
		}
		seen[k] = true
		batched = append(batched, i)
	}
	return batched, rest
}
