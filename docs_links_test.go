package dlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestDocLinks: every relative link in README.md, BENCHMARKS.md and
// docs/*.md points at a file that exists and, with a #fragment, at a
// heading of that file (GitHub's anchor rules).
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md", "BENCHMARKS.md"}, files...)
	for _, bad := range brokenLinks(t, files) {
		t.Error(bad)
	}
}

// TestDocLinksControl: the checker reports a missing file and a missing
// anchor, and accepts a good file link, a good anchor and a web link.
func TestDocLinksControl(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("b.md", "# Title\n\n## Safety model: what a `Lease` promises\n")
	a := write("a.md", "[ok](b.md) [ok](b.md#safety-model-what-a-lease-promises) [ok](#here)\n"+
		"[web](https://example.com/x) [gone](missing.md) [gone](b.md#nowhere)\n\n## Here\n"+
		"```\n[in code](ignored.md)\n```\n")
	got := brokenLinks(t, []string{a})
	if len(got) != 2 || !strings.Contains(got[0], "missing.md") || !strings.Contains(got[1], "b.md#nowhere") {
		t.Errorf("broken links found = %q, want missing.md and b.md#nowhere", got)
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// brokenLinks returns one line per relative link in files that does not
// resolve. Links inside fenced code blocks are not links.
func brokenLinks(t *testing.T, files []string) []string {
	t.Helper()
	var bad []string
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range proseLines(string(text)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				file := f
				if path != "" {
					file = filepath.Join(filepath.Dir(f), path)
				}
				if _, err := os.Stat(file); err != nil {
					bad = append(bad, f+":"+strconv.Itoa(i+1)+": "+target+": no such file")
					continue
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					bad = append(bad, f+":"+strconv.Itoa(i+1)+": "+target+": anchor in a non-markdown file")
					continue
				}
				body, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(string(body))[frag] {
					bad = append(bad, f+":"+strconv.Itoa(i+1)+": "+target+": no such heading")
				}
			}
		}
	}
	return bad
}

// proseLines returns the file's lines with those inside fenced code blocks
// blanked, keeping line numbers.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// anchors returns the GitHub anchors of the markdown text's headings:
// lower case, punctuation dropped, spaces to hyphens, "-1", "-2" on repeats.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127 && isLetter(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func isLetter(r rune) bool { return strings.ToUpper(string(r)) != strings.ToLower(string(r)) }

// TestDocReadmeProgramCompiles: the README's complete program (its Go block
// that starts with "package main") builds against this module.
func TestDocReadmeProgramCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(text), "```go\npackage main\n")
	if !ok {
		t.Fatal("README.md has no ```go block starting with package main")
	}
	src, _, ok := strings.Cut(after, "\n```")
	if !ok {
		t.Fatal("README.md: the program's block does not end")
	}
	// Inside the module (a directory starting with _ is outside ./...), so
	// that its imports resolve through go.mod.
	dir, err := os.MkdirTemp(".", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"+src+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		goCmd = "go"
	}
	cmd := exec.Command(goCmd, "build", "-o", os.DevNull, "./"+filepath.Base(dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's program does not build: %v\n%s", err, out)
	}
}
