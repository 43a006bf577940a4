package idemhttp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/http"
)

// recorder buffers a handler's response so that it can be stored before
// it is sent.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: make(http.Header)} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// code is the response's status (200 if the handler wrote nothing).
func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// sendTo writes the response to w as the handler made it.
func (r *recorder) sendTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	w.WriteHeader(r.code())
	_, _ = w.Write(r.body.Bytes())
}

// response is a stored response: status, the chosen headers, body.
type response struct {
	status int
	header http.Header
	body   []byte
}

// encode stores r's status, its headers named in keep (canonical names)
// and its body: uvarints and length-prefixed strings, version 1.
func (r *recorder) encode(keep []string) []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(r.code()))
	var n uint64
	for _, k := range keep {
		n += uint64(len(r.header[k]))
	}
	b = binary.AppendUvarint(b, n)
	for _, k := range keep {
		for _, v := range r.header[k] {
			b = appendString(b, k)
			b = appendString(b, v)
		}
	}
	return append(b, r.body.Bytes()...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errCorrupt = errors.New("idemhttp: stored response is not one this package wrote")

// decode reads what encode wrote.
func decode(b []byte) (response, error) {
	if len(b) == 0 || b[0] != 1 {
		return response{}, errCorrupt
	}
	b = b[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		l, ok := next()
		if !ok || l > uint64(len(b)) {
			return "", false
		}
		s := string(b[:l])
		b = b[l:]
		return s, true
	}
	status, ok1 := next()
	n, ok2 := next()
	if !ok1 || !ok2 || status < 100 || status > 999 || n > uint64(len(b)) {
		return response{}, errCorrupt
	}
	res := response{status: int(status), header: make(http.Header)}
	for range n {
		k, ok1 := str()
		v, ok2 := str()
		if !ok1 || !ok2 {
			return response{}, errCorrupt
		}
		res.header[k] = append(res.header[k], v)
	}
	res.body = b
	return res, nil
}
