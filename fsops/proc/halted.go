package proc

import (
	"bytes"
	"os"
	"strconv"
)

// Halted reports whether process pid cannot take work now: stopped or
// traced (state T or t), or dead (Z, X), as this process's /proc shows
// it. A process waiting on a descriptor sleeps (S); one still starting
// runs (R) or waits on a page (D), and gets there. Without a /proc to ask
// it reports false (the caller finds a dead process out by other means).
// The init asks it of an idle tool worker before handing it a call: an
// agent process of the same uid may have stopped it to stall the call.
func Halted(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	switch b[i+2] {
	case 'T', 't', 'Z', 'X', 'x':
		return true
	}
	return false
}
