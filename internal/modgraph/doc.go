// Package modgraph holds no code: its tests check that a library user's
// module graph stays free of the CLI's, the chaos suite's and the heavy
// backends' dependencies (issue 14: a Redis-only user must not pull cobra,
// miniredis, porcupine, progressbar, etcd or gRPC into their build, nor
// OpenTelemetry or Prometheus, which only the otel module requires), and
// that no store package nor package driver imports the user package
// (issue 24: stores sit below it).
package modgraph
