package main

import (
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram (64 sub-buckets per power of two,
// under 1.6 % error) that merges across goroutines and processes.
type hist struct {
	Counts map[int]int64 `json:"counts"`
	Max    int64         `json:"max_ns"`
	N      int64         `json:"n"`
}

func newHist() *hist { return &hist{Counts: map[int]int64{}} }

const subBits = 6

func bucketOf(v int64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits - 1
	return (e+1)<<subBits + int(v>>e) - 1<<subBits
}

func bucketValue(b int) int64 {
	if b < 1<<subBits {
		return int64(b)
	}
	e := b>>subBits - 1
	m := int64(b&(1<<subBits-1)) + 1<<subBits
	return (m<<e + (m+1)<<e) / 2
}

func (h *hist) add(d time.Duration) {
	v := int64(d)
	h.Counts[bucketOf(v)]++
	h.N++
	h.Max = max(h.Max, v)
}

func (h *hist) merge(o *hist) {
	for b, c := range o.Counts {
		h.Counts[b] += c
	}
	h.N += o.N
	h.Max = max(h.Max, o.Max)
}

func (h *hist) quantile(q float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	rank := int64(q * float64(h.N-1))
	keys := make([]int, 0, len(h.Counts))
	for b := range h.Counts {
		keys = append(keys, b)
	}
	sortInts(keys)
	var seen int64
	for _, b := range keys {
		seen += h.Counts[b]
		if seen > rank {
			return time.Duration(min(bucketValue(b), h.Max))
		}
	}
	return time.Duration(h.Max)
}
