#!/usr/bin/env bash
# Runs the etcd store's conformance, interop and safety tests against a
# current etcd server (default v3.6.16) instead of Debian's 3.4: builds etcd's
# own server main (go.etcd.io/etcd/server/v3/etcdmain) from the Go module
# proxy in a temporary module, puts it first on PATH (the test harness finds
# `etcd` there), and runs the tests. Not part of scripts/test.sh: the build
# takes minutes on two cores.
#
#   scripts/test-etcd-current.sh [version]
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-v3.6.16}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
(cd "$work" && GOWORK=off go mod init example.com/etcdcurrent >/dev/null 2>&1 &&
	GOWORK=off go get "go.etcd.io/etcd/server/v3@$version" >/dev/null 2>&1 &&
	GOWORK=off go build -o "$work/bin/etcd" .)
"$work/bin/etcd" --version | head -1
cd etcdstore
PATH="$work/bin:$PATH" go test -count=1 -v -run 'TestConformance|TestAcquireReentryRelease|TestFencesIncrease|TestQueuedFIFO|TestQueuedCancelLeavesNothing|TestOwnerCmp|TestStaleReleaseGuard|TestLossSignalledBeforeServerFrees|TestEtcdctlInterop|TestClientServerVersions|TestTwoTokensOneStore|TestInspectListDoctor' . |
	grep -E '^(--- |ok|FAIL)|client .*server'
