#!/usr/bin/env bash
# Runs every test of the project on a fresh Debian machine with Go:
# installs what the tests need and is missing, from Debian's packages when
# run as root (redis-server and etcd-server, which the tests start;
# redis-tools, for redis-cli; etcd-client, for the etcdctl interoperability
# test; zookeeper and a JRE, for the ZooKeeper servers; a JDK and
# libcurator-recipes-java, for the Curator interoperability test; postgresql, whose
# initdb and postgres the pgstore tests start; pgbouncer, which they put in
# front of it; mariadb-server, which the
# MySQL store's tests start; chromium, which renders the demo's HTML report
# in a test; tmux, the terminal in which a test runs `dlock top`), then
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
	[tmux]=tmux
	[etcd]=etcd-server
	[etcdctl]=etcd-client
	# ZooKeeper: internal/zkserver runs /usr/share/java/zookeeper.jar with
	# java; zooinspector is the one command the zookeeper package puts on
	# PATH, so it marks the package (which brings the jars and default-jre).
	[java]=default-jre-headless
	[zooinspector]=zookeeper
	[initdb]=postgresql
	[pg_isready]=postgresql
	[mariadbd]=mariadb-server
	# internal/pgbouncer starts /usr/sbin/pgbouncer (found by the /usr/sbin
	# test below: /usr/sbin is not on every PATH).
	[pgbouncer]=pgbouncer
	# zkstore's Curator interop test compiles a Java program with javac.
	[javac]=default-jdk-headless
)
# file -> Debian package providing it (jars, which have no command)
declare -A files=(
	[/usr/share/java/curator-recipes.jar]=libcurator-recipes-java
)
missing=()
for cmd in "${!packages[@]}"; do
	# PostgreSQL's programs live in /usr/lib/postgresql/<major>/bin and
	# mariadbd in /usr/sbin: neither is always on PATH.
	command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] ||
		compgen -G "/usr/lib/postgresql/*/bin/$cmd" >/dev/null || missing+=("${packages[$cmd]}")
done
for f in "${!files[@]}"; do
	[ -e "$f" ] || missing+=("${files[$f]}")
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

# test_module vets and tests one module from its directory (bench without
# -race: its quick run measures).
test_module() {
	local name=${1%%=*} dir=${1#*=}
	echo "test.sh: module $name"
	if [ "$name" = example.com/dlock/bench ]; then
		(cd "$dir" && go vet ./... && go test -count=1 -timeout 5m ./...)
	else
		(cd "$dir" && go vet ./... && go test -race -count=1 -timeout 20m ./...)
	fi || {
		echo "test.sh: module $name failed" >&2
		return 1
	}
}

# The modules run in two lanes at once, each printed when it ends: the store
# modules that start their own servers (most of their time is spent waiting
# on them), and the rest. Every module runs even when one fails; the exit
# status is 1 if any failed.
lane() {
	local failed=0
	for mod in "$@"; do
		test_module "$mod" || failed=1
	done
	return $failed
}
stores=() others=()
for mod in $modules; do
	case ${mod%%=*} in
	*/etcdstore | */zkstore | */pgstore | */mysqlstore) stores+=("$mod") ;;
	*) others+=("$mod") ;;
	esac
done
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
lane "${stores[@]}" >"$logs/stores" 2>&1 &
stores_pid=$!
status=0
lane "${others[@]}" 2>&1 || status=1
wait "$stores_pid" || status=1
cat "$logs/stores"
if ((status)); then
	grep -h "^test.sh: module .* failed" "$logs/stores" >&2 || true
	echo "test.sh: FAILED" >&2
fi
exit $status
