// Package modgraph holds no code: its test checks that a library user's
// module graph stays free of the CLI's, the chaos suite's and the heavy
// backends' dependencies (issue 14: a Redis-only user must not pull cobra,
// miniredis, porcupine, progressbar, etcd or gRPC into their build).
package modgraph
