package modgraph

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// forbidden are module paths (or path prefixes) a Redis-only user of the
// library must not find in their module graph.
var forbidden = []string{
	"github.com/spf13/cobra",
	"github.com/alicebob/miniredis",
	"github.com/anishathalye/porcupine",
	"github.com/schollz/progressbar",
	"go.etcd.io/",
	"google.golang.org/grpc",
	"github.com/go-zookeeper/zk",
	"github.com/jackc/pgx",
	"github.com/go-sql-driver/mysql",
	"go.opentelemetry.io/", // the OTel adapter is a module of its own (otel/)
	"github.com/prometheus/",
}

// storeModules are the repository's store modules the CLI's module
// requires: a user module that requires the CLI must replace each (a
// replace in a dependency's go.mod does not apply).
var storeModules = []string{"etcdstore", "zkstore", "pgstore", "mysqlstore"}

// userMain is a Redis-only user's program: the library and its Redis store.
const userMain = `package main

import (
	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/redisstore"
)

func main() {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	s, _ := redisstore.New(c, nil)
	_, _ = dlock.New(s)
}
`

// repoRoot is the directory of the root module (two levels above this file).
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// moduleGraph writes a temporary module that requires example.com/dlock
// (replaced by this clone) and, if extra is set, one more of the clone's
// modules, and returns the output of `go list -m all` in it.
func moduleGraph(t *testing.T, extraPath, extraDir string) string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	mod := "module example.com/redisuser\n\ngo 1.26.8\n\nrequire (\n\texample.com/dlock v0.0.0\n\tgithub.com/redis/go-redis/v9 v9.23.0\n"
	if extraPath != "" {
		mod += "\t" + extraPath + " v0.0.0\n"
	}
	mod += ")\n\nreplace example.com/dlock => " + root + "\n"
	// The CLI's module requires the store modules: a replace in a
	// dependency's go.mod does not apply, so the user's module names them
	// too (a replace of a module nothing requires changes nothing).
	for _, m := range storeModules {
		mod += "replace example.com/dlock/" + m + " => " + filepath.Join(root, m) + "\n"
	}
	if extraPath != "" {
		mod += "replace " + extraPath + " => " + filepath.Join(root, extraDir) + "\n"
	}
	sum := readFile(t, filepath.Join(root, "go.sum"))
	if extraDir != "" {
		sum += readFile(t, filepath.Join(root, extraDir, "go.sum"))
		for _, m := range storeModules {
			sum += readFile(t, filepath.Join(root, m, "go.sum"))
		}
	}
	writeFile(t, filepath.Join(dir, "go.mod"), mod)
	writeFile(t, filepath.Join(dir, "go.sum"), sum)
	writeFile(t, filepath.Join(dir, "main.go"), userMain)

	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, args := range [][]string{{"build", "-o", os.DevNull, "."}, {"list", "-m", "all"}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a Redis-only user's module: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "list" {
			return string(out)
		}
	}
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// found returns the forbidden modules present in a `go list -m all` output.
func found(graph string) []string {
	var hits []string
	for _, line := range strings.Split(graph, "\n") {
		mod, _, _ := strings.Cut(line, " ")
		for _, f := range forbidden {
			if strings.HasPrefix(mod, f) {
				hits = append(hits, mod)
			}
		}
	}
	return hits
}

// TestRedisUserGraphIsLean: a module that uses the library with its Redis
// store builds, and its module graph holds none of the forbidden modules.
func TestRedisUserGraphIsLean(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	graph := moduleGraph(t, "", "")
	if !strings.Contains(graph, "github.com/redis/go-redis/v9") {
		t.Fatalf("go list -m all does not list go-redis; the check reads the wrong output:\n%s", graph)
	}
	if hits := found(graph); len(hits) > 0 {
		t.Errorf("a Redis-only user's module graph pulls %v (go list -m all):\n%s", hits, graph)
	}
}

// TestGraphCheckSeesTheCLI is the negative control: the same user module
// requiring the CLI's module shows cobra, miniredis, etcd, gRPC and the
// ZooKeeper, PostgreSQL and MySQL drivers, so the check above can fail.
func TestGraphCheckSeesTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	graph := moduleGraph(t, "example.com/dlock/cmd/dlock", "cmd/dlock")
	hits := strings.Join(found(graph), " ")
	for _, want := range []string{"github.com/spf13/cobra", "github.com/alicebob/miniredis", "go.etcd.io", "google.golang.org/grpc",
		"github.com/go-zookeeper/zk", "github.com/jackc/pgx", "github.com/go-sql-driver/mysql"} {
		if !strings.Contains(hits, want) {
			t.Errorf("with the CLI's module required, the check found %q, not %s:\n%s", hits, want, graph)
		}
	}
}

// TestGraphCheckSeesOTel is the negative control of the OTel adapter's
// module: the same user module requiring example.com/dlock/otel shows
// go.opentelemetry.io, so the check above would see the root module
// requiring it.
func TestGraphCheckSeesOTel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	graph := moduleGraph(t, "example.com/dlock/otel", "otel")
	if hits := strings.Join(found(graph), " "); !strings.Contains(hits, "go.opentelemetry.io/otel") {
		t.Errorf("with the OTel module required, the check found %q, not go.opentelemetry.io/otel:\n%s", hits, graph)
	}
}
