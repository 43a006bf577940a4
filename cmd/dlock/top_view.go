package main

import (
	"context"
	"io"
)

// ANSI escape codes of the terminal view's screen.
const (
	ansiAltScreen  = "\x1b[?1049h" // switch to the alternate screen
	ansiMainScreen = "\x1b[?1049l" // back to the main screen, as it was
	ansiHideCursor = "\x1b[?25l"
	ansiShowCursor = "\x1b[?25h"
)

// enterView prepares the terminal out (and in, if it is one) for the live
// view: the alternate screen, the cursor hidden and, where the platform
// allows (keyReader), keys read one at a time without echo, Ctrl-C still
// interrupting. It returns ctx, cancelled when the user types q, and the
// function that puts the terminal back as it was (the main screen and its
// content, the cursor, the line discipline); call it once.
func enterView(ctx context.Context, in io.Reader, out io.Writer) (context.Context, func()) {
	_, _ = io.WriteString(out, ansiAltScreen+ansiHideCursor)
	ctx, cancel := context.WithCancel(ctx)
	restoreKeys := keyReader(in, func(b byte) {
		if b == 'q' || b == 'Q' {
			cancel()
		}
	})
	return ctx, func() {
		cancel()
		restoreKeys()
		_, _ = io.WriteString(out, ansiShowCursor+ansiMainScreen)
	}
}
