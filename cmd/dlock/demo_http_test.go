package main

import (
	"io"
	"net/http"
)

type demoHTTPReply struct {
	code int
	body string
}

func demoHTTPPost(url string) (demoHTTPReply, error) {
	resp, err := http.Post(url, "", nil)
	if err != nil {
		return demoHTTPReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return demoHTTPReply{resp.StatusCode, string(b)}, err
}
