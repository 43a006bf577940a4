package main

import (
	"io"
	"net/http"
)

type httpReply struct {
	code int
	body string
}

func httpPost(url string) (httpReply, error) {
	resp, err := http.Post(url, "", nil)
	if err != nil {
		return httpReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return httpReply{resp.StatusCode, string(b)}, err
}
