package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// runMeta is the holder metadata run records with its holding
// (dlock.WithMeta), on the stores that keep it, for status and list to
// show: "host=H pid=P cmd=C since=T", with dlock run's own host name and
// process id (the process to stop to end the holding), the base name of
// COMMAND's argv[0], and the time run started (RFC 3339, UTC, seconds).
// Values never contain spaces: whitespace and control characters become
// '_', and long host and command names are cut, so that the whole stays
// well within driver.MaxMetaLen. It holds no secret.
func runMeta(argv0 string, started time.Time) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("host=%s pid=%d cmd=%s since=%s", metaWord(host, 64), os.Getpid(),
		metaWord(filepath.Base(argv0), 96), started.UTC().Format(time.RFC3339))
}

// metaWord is s as one word of runMeta: at most n bytes of valid UTF-8,
// whitespace, control characters and invalid bytes replaced by '_'.
func metaWord(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return '_'
		}
		return r
	}, s)
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	if s == "" {
		return "_"
	}
	return s
}
