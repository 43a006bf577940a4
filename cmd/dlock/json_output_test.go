package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
)

// docField is one row of a table under "## JSON output" in docs/cli.md.
type docField struct {
	typ    string // string, integer, number, boolean, object, array
	always bool   // present whenever its parent is
}

// jsonDocs reads the field tables of docs/cli.md's JSON output section, by
// command ("run", "status", ...).
func jsonDocs(t *testing.T) map[string]map[string]docField {
	t.Helper()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## JSON output\n")
	if !ok {
		t.Fatal("docs/cli.md has no JSON output section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	head := regexp.MustCompile("^### `(\\w+(?: --(?:kind|scenario) [\\w-]+)?) --json`")
	row := regexp.MustCompile("^\\| `([^`]+)` \\| (\\w+) \\| (.*) \\|$")
	docs := map[string]map[string]docField{}
	var cmd string
	for _, line := range strings.Split(section, "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			cmd = m[1]
			docs[cmd] = map[string]docField{}
		} else if m := row.FindStringSubmatch(line); m != nil && cmd != "" {
			docs[cmd][m[1]] = docField{typ: m[2], always: strings.HasPrefix(m[3], "always")}
		}
	}
	for _, c := range []string{"run", "status", "list", "top", "doctor", "bench", "version"} {
		if len(docs[c]) == 0 {
			t.Fatalf("docs/cli.md documents no fields of %s --json", c)
		}
	}
	return docs
}

// checkJSON decodes out (one JSON document) and checks it against the
// documented fields: every field it has is documented with its type, and
// every field documented as always present is there. It returns the
// document's field paths.
func checkJSON(t *testing.T, fields map[string]docField, out string) map[string]bool {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&v); err != nil || dec.More() {
		t.Fatalf("not one JSON document (%v): %q", err, out)
	}
	seen := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if path != "" && !strings.HasSuffix(path, "[]") { // an element's fields are checked below
			seen[path] = true
			d, ok := fields[path]
			if !ok {
				t.Errorf("field %s (%v) is not documented", path, v)
			} else if got := jsonType(v); got != d.typ && !(d.typ == "number" && got == "integer") {
				t.Errorf("field %s is %s (%v), documented as %s", path, got, v, d.typ)
			}
		}
		dot := path
		if dot != "" {
			dot += "."
		}
		switch v := v.(type) {
		case map[string]any:
			for name, d := range fields { // the documented children that are always there
				rest, ok := strings.CutPrefix(name, dot)
				if ok && d.always && !strings.ContainsAny(rest, ".[") {
					if _, has := v[rest]; !has {
						t.Errorf("field %s%s is documented as always present, missing in %v", dot, rest, v)
					}
				}
			}
			for k, e := range v {
				walk(dot+k, e)
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("", v)
	return seen
}

func jsonType(v any) string {
	switch v := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if v == math.Trunc(v) {
			return "integer"
		}
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// Every command's --json against the tables of docs/cli.md, on the
// in-process memstore (and a closed port for doctor's unreachable store).
func TestJSONOutputsMatchDocs(t *testing.T) {
	docs := jsonDocs(t)
	l := holdMem(t, "json:held")

	code, out, stderr := runCLI(t, "status", "--json", "--store", "mem://full", "json:held")
	if code != 0 {
		t.Fatalf("status: exit %d %s", code, stderr)
	}
	seen := checkJSON(t, docs["status"], out)
	var st lockStatus
	_ = json.Unmarshal([]byte(out), &st)
	if !seen["ttl_ms"] || st.Holder != abbrev(l.Token()) || strings.Contains(out, "…") || strings.Contains(out, l.Token()) {
		t.Errorf("status of a held key: want ttl_ms and the token's prefix without an ellipsis, never the whole: %s", out)
	}
	code, out, _ = runCLI(t, "status", "--json", "--store", "mem://full", "json:free")
	if seen := checkJSON(t, docs["status"], out); code != 0 || seen["ttl_ms"] || seen["holder"] || seen["holder_kind"] {
		t.Errorf("status of a free key: want no ttl_ms, holder or holder_kind: exit %d %s", code, out)
	}

	code, out, _ = runCLI(t, "list", "--json", "--store", "mem://full", "json:*")
	if seen := checkJSON(t, docs["list"], out); code != 0 || !seen["[].key"] || strings.Contains(out, "…") {
		t.Errorf("list: exit %d %s", code, out)
	}
	if code, out, _ = runCLI(t, "list", "--json", "--store", "mem://full", "json-none:*"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("list of nothing: exit %d %q, want []", code, out)
	}

	code, out, _ = runCLI(t, "doctor", "--json", "--store", "mem://full")
	if seen := checkJSON(t, docs["doctor"], out); code != 0 || !seen["model.min_ttl"] || !seen["checks[].name"] {
		t.Errorf("doctor: exit %d %s", code, out)
	}
	code, out, _ = runCLI(t, "bench", "--json", "--store", "mem://full", "--duration", "50ms", "--goroutines", "2")
	if seen := checkJSON(t, docs["bench"], out); code != 0 || !seen["scenarios[].ops_per_sec"] {
		t.Errorf("bench: exit %d %s", code, out)
	}
	code, out, _ = runCLI(t, "version", "--json")
	checkJSON(t, docs["version"], out)
	if code != 0 {
		t.Errorf("version: exit %d", code)
	}
}

// run --json: one object, the last line on stderr, for each kind of outcome.
func TestRunJSONOutcomes(t *testing.T) {
	docs := jsonDocs(t)
	holdMem(t, "json:busy")
	for _, c := range []struct {
		args    []string
		code    int
		outcome string
		stdout  string
	}{
		{[]string{"json:ok", "--", "sh", "-c", "echo out; echo err >&2; exit 3"}, 3, outcomeExited, "out\n"},
		{[]string{"json:ok", "--", "true"}, 0, outcomeExited, ""},
		{[]string{"-n", "json:busy", "--", "true"}, ExitNotAcquired, outcomeNotAcquired, ""},
		{[]string{"-n", "-E", "0", "json:busy", "--", "true"}, 0, outcomeNotAcquired, ""},
		{[]string{"json:ok", "--", "/no/such/command"}, 127, outcomeNotFound, ""},
		{[]string{"--lease", "1ms", "json:ok", "--", "true"}, ExitUsage, outcomeUsage, ""},
	} {
		args := append([]string{"run", "--json", "--store", "mem://full"}, c.args...)
		code, out, stderr := runCLI(t, args...)
		line := lastLine(stderr)
		seen := checkJSON(t, docs["run"], line)
		var o runOutcome
		_ = json.Unmarshal([]byte(line), &o)
		if code != c.code || o.ExitCode != c.code || o.Outcome != c.outcome || c.stdout != "" && out != c.stdout {
			t.Errorf("dlock %q: exit %d, stdout %q, stderr %q; want exit %d, outcome %s", args, code, out, stderr, c.code, c.outcome)
		}
		ran := c.outcome == outcomeExited
		if o.Acquired != (ran || c.outcome == outcomeNotFound) || seen["command_status"] != ran || seen["fence"] != o.Acquired ||
			seen["held_ms"] != o.Acquired || seen["released"] != o.Acquired || seen["error"] != !ran {
			t.Errorf("dlock %q: fields %v do not fit the outcome: %s", args, seen, line)
		}
		if strings.Count(stderr, line) != 1 || strings.Contains(out, "{") {
			t.Errorf("dlock %q: the object is not once on stderr alone: stdout %q stderr %q", args, out, stderr)
		}
	}
}

// run --json-fd N writes the object there, not on stderr; a descriptor that
// is not open is a usage error.
func TestRunJSONFD(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	code, _, stderr := runCLI(t, "run", "--json", "--json-fd", fmt.Sprint(w.Fd()), "--store", "mem://full", "json:fd", "--", "true")
	_ = w.Close()
	b := make([]byte, 4096)
	n, _ := r.Read(b)
	var o runOutcome
	if code != 0 || json.Unmarshal(b[:n], &o) != nil || o.Outcome != outcomeExited || strings.Contains(stderr, "{") {
		t.Fatalf("--json-fd: exit %d, fd got %q, stderr %q", code, b[:n], stderr)
	}
	if code, _, stderr := runCLI(t, "run", "--json", "--json-fd", "987", "--store", "mem://full", "json:fd", "--", "true"); code != ExitUsage || !strings.Contains(stderr, "--json-fd 987 is not open") {
		t.Fatalf("--json-fd on a closed descriptor: exit %d, %q", code, stderr)
	}
}

// doctor --json on a store it cannot reach still prints its report: one
// FAIL check "connection", no model, and the exit code of an unreachable
// store; bad usage prints nothing.
func TestDoctorJSONUnreachableStore(t *testing.T) {
	docs := jsonDocs(t)
	url := fmt.Sprintf("redis://u:secret@127.0.0.1:%d", closedPort(t))
	code, out, stderr := runCLI(t, "doctor", "--json", "--store", url)
	seen := checkJSON(t, docs["doctor"], out)
	var rep doctorReport
	_ = json.Unmarshal([]byte(out), &rep)
	if code != ExitUnavailable || rep.Safe || seen["model"] || len(rep.Checks) != 1 || rep.Checks[0].Name != "connection" ||
		rep.Checks[0].Status != statusFail || !strings.Contains(rep.Checks[0].Detail, "cannot reach") || rep.Checks[0].Fix == "" {
		t.Fatalf("doctor --json on a closed port: exit %d, stdout %s, stderr %q", code, out, stderr)
	}
	if strings.Contains(out, "secret") || !strings.HasPrefix(rep.Target, "redis://127.0.0.1:") {
		t.Errorf("target %q: want the URL without its password", rep.Target)
	}
	if code, out, _ := runCLI(t, "doctor", "--json", "--store", "nosuch://x"); code != ExitUsage || out != "" {
		t.Errorf("doctor --json with a bad URL: exit %d, stdout %q; want 64 and nothing", code, out)
	}
}

// The help of every command with --json says so.
func TestHelpDescribesJSON(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"run", "--json prints one JSON object when run ends"}, {"run", "--json-fd"},
		{"status", "--json prints one object"}, {"doctor", `"connection"`},
		{"list", "--json"}, {"top", "--once --json prints the frame"}, {"bench", "--json prints one JSON document"}, {"version", "--json"},
	} {
		if _, out, _ := runCLI(t, c.cmd, "--help"); !strings.Contains(out, c.want) {
			t.Errorf("%s --help lacks %q", c.cmd, c.want)
		}
	}
}
