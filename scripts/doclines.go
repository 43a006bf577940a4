//go:build ignore

// doclines reports the doc-comment lines of the exported functions and
// methods (on exported types) in the non-test files of the given package
// directories: the average, and the longest ones.
//
//	go run scripts/doclines.go . driver
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// limit is how many of the longest comments to list.
const limit = 40

type fn struct {
	name  string
	lines int
}

func main() {
	for _, dir := range os.Args[1:] {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			log.Fatal(err)
		}
		fset := token.NewFileSet()
		var fns []fn
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				log.Fatal(err)
			}
			for _, d := range file.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || !fd.Name.IsExported() {
					continue
				}
				name := fd.Name.Name
				if fd.Recv != nil {
					t := fd.Recv.List[0].Type
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					}
					if g, ok := t.(*ast.IndexExpr); ok {
						t = g.X
					}
					id, ok := t.(*ast.Ident)
					if !ok || !id.IsExported() {
						continue
					}
					name = id.Name + "." + name
				}
				n := 0
				if fd.Doc != nil {
					n = fset.Position(fd.Doc.End()).Line - fset.Position(fd.Doc.Pos()).Line + 1
				}
				fns = append(fns, fn{name, n})
			}
		}
		total := 0
		for _, f := range fns {
			total += f.lines
		}
		sort.Slice(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
		fmt.Printf("%s: %d exported functions, %d doc lines, average %.1f\n", dir, len(fns), total, float64(total)/float64(len(fns)))
		for _, f := range fns[:min(len(fns), limit)] {
			fmt.Printf("  %3d %s\n", f.lines, f.name)
		}
	}
}
