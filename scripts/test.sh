#!/usr/bin/env bash
# Runs every test of the project on a fresh Debian machine with Go:
# installs what the tests need and is missing, from Debian's packages when
# run as root (redis-server and etcd-server, which the tests start;
# redis-tools, for redis-cli; etcd-client, for the etcdctl interoperability
# test; zookeeper and a JRE, for the ZooKeeper servers; mariadb-server, which the MySQL store's tests
# start; postgresql, whose initdb and postgres the pgstore tests start;
# chromium, which renders the demo's HTML report in a test), then
# gofmt, go vet and go test -race over every module of the workspace (go.work),
# and bench/'s quick run.
#
#   scripts/test.sh            # everything
#   scripts/test.sh ./redisstore/...   # a subset (arguments go to go test)
set -euo pipefail
cd "$(dirname "$0")/.."

# command -> Debian package providing it
declare -A packages=(
	[redis-server]=redis-server
	[redis-cli]=redis-tools
	[chromium]=chromium
	[etcd]=etcd-server
	[etcdctl]=etcd-client
	# ZooKeeper: internal/zkserver runs /usr/share/java/zookeeper.jar with
	# java; zooinspector is the one command the zookeeper package puts on
	# PATH, so it marks the package (which brings the jars and default-jre).
	[java]=default-jre-headless
	[zooinspector]=zookeeper
	[mariadbd]=mariadb-server
	[initdb]=postgresql
	[pg_isready]=postgresql
)
missing=()
for cmd in "${!packages[@]}"; do
	# mariadbd lives in /usr/sbin, often not on a user's PATH; PostgreSQL's
	# programs live in /usr/lib/postgresql/<major>/bin, not on PATH.
	command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] ||
		compgen -G "/usr/lib/postgresql/*/bin/$cmd" >/dev/null || missing+=("${packages[$cmd]}")
done
if ((${#missing[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "test.sh: missing ${missing[*]}; run as root to install them, or install them yourself" >&2
		exit 1
	fi
	echo "test.sh: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "test.sh: gofmt would change: $unformatted" >&2
	exit 1
fi
# The repository is several modules (go.work lists them): the library at the
# root, the CLI (cmd/dlock), the chaos suite (internal/chaos), the comparison
# benchmark (bench) and any store in a module of its own. In workspace mode
# `go test ./...` from the root covers only the root module, so each module is
# vetted and tested from its own directory.
modules=$(go list -m -f '{{.Path}}={{.Dir}}')
if (($#)); then
	go vet ./...
	go test -race -count=1 -timeout 20m "$@"
	exit
fi
for mod in $modules; do
	name=${mod%%=*} dir=${mod#*=}
	echo "test.sh: module $name"
	if [ "$name" = example.com/dlock/bench ]; then
		# bench/ depends on the peer libraries it compares against; its quick
		# run checks every scenario's counter for dlock and the floor.
		(cd "$dir" && go vet ./... && go test -count=1 -timeout 5m ./...)
		continue
	fi
	(cd "$dir" && go vet ./... && go test -race -count=1 -timeout 20m ./...) || {
		echo "test.sh: module $name failed" >&2
		exit 1
	}
done
