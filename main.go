// Command ctx is a busybox-style multicall binary: it picks an applet from the
// base name of argv[0] (or from argv[1] when invoked as ctx) and runs it.
package main

import (
	"os"

	"ctx/applets"
)

func main() {
	growStack(0)
	os.Exit(applets.Main(os.Args))
}

// growStack grows the main goroutine's stack to the size an applet's call
// path needs, in one step while the stack is two frames deep. Left to
// itself the stack starts at 8 KiB and is copied as it doubles, each copy
// walking every frame on it (the unwinder's tables are read from the
// binary, page by page); those copies were a visible share of fs.read's
// page faults. Its frame is all it costs: n is 0, so the array is never
// written or read.
//
//go:noinline
func growStack(n int) byte {
	if n > 0 {
		var frame [stackSize]byte
		frame[n%stackSize] = byte(n)
		return frame[(n/2)%stackSize]
	}
	return 0
}

// stackSize is what the deep common paths (a tool call's schema check and
// event) fit in, with room to spare.
const stackSize = 32 << 10
