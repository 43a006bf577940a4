package modgraph

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rootPkg is the user package: stores sit below it, not beside it.
const rootPkg = "example.com/dlock"

// belowRoot are the packages that must not import the user package, directly
// or through another package (issue 24): the driver contract and every store.
// What they share with it (key validation, sentinel errors, Clock) lives in
// package driver.
var belowRoot = []string{
	"example.com/dlock/driver",
	"example.com/dlock/memstore",
	"example.com/dlock/redisstore",
	"example.com/dlock/redlock",
	"example.com/dlock/etcdstore",
	"example.com/dlock/zkstore",
	"example.com/dlock/pgstore",
	"example.com/dlock/mysqlstore",
}

// importersOfRoot returns the packages of pkgs whose non-test build imports
// rootPkg, directly or not, per `go list -deps` run in the workspace (the
// store modules are in go.work). overlay, if set, is a go list -overlay
// file.
func importersOfRoot(t *testing.T, overlay string, pkgs ...string) []string {
	t.Helper()
	env := exec.Command("go", "env", "GOWORK")
	env.Dir = repoRoot(t)
	if out, err := env.Output(); err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == "off" {
		t.Skipf("needs the workspace (go.work), which lists the store modules: GOWORK=%q, %v", out, err)
	}
	var bad []string
	for _, p := range pkgs {
		args := []string{"list", "-deps", "-f", "{{.ImportPath}}"}
		if overlay != "" {
			args = append(args, "-overlay", overlay)
		}
		cmd := exec.Command("go", append(args, p)...)
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == rootPkg {
				bad = append(bad, p)
				break
			}
		}
	}
	return bad
}

// TestStoresDoNotImportTheUserPackage checks that no store package and not
// package driver imports package dlock (non-test files), so that a store
// can be built, and a new primitive added, below the user package.
func TestStoresDoNotImportTheUserPackage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	if bad := importersOfRoot(t, "", belowRoot...); len(bad) > 0 {
		t.Errorf("these packages import %s (move what they use into package driver): %v", rootPkg, bad)
	}
}

// TestStoreImportCheckCatchesAnImport is the control: the same check, with
// a file added to memstore (through go list's -overlay, nothing is written
// to the tree) that imports package dlock, reports memstore.
func TestStoreImportCheckCatchesAnImport(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "synthetic.go")
	if err := os.WriteFile(src, []byte("package memstore\n\nimport _ \""+rootPkg+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(repoRoot(t), "memstore", "zz_synthetic_import.go")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {target: src}})
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := importersOfRoot(t, overlay, "example.com/dlock/memstore", "example.com/dlock/driver")
	if len(bad) != 1 || bad[0] != "example.com/dlock/memstore" {
		t.Fatalf("with a synthetic import of %s in memstore the check reports %v, want [example.com/dlock/memstore]", rootPkg, bad)
	}
}
