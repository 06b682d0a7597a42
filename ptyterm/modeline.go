package ptyterm

import (
	"bytes"
	"errors"
	"io"
)

// Mode is what a socket client asked for in its mode line.
type Mode int

const (
	// Watch receives the PTY output; its input is read and discarded.
	Watch Mode = iota + 1
	// Attach receives the PTY output and writes to the PTY.
	Attach
)

func (m Mode) String() string {
	switch m {
	case Watch:
		return "watch"
	case Attach:
		return "attach"
	}
	return "invalid"
}

// maxModeLine bounds what a client may send before ctxterm decides: the
// longest valid line is "attach\n" (7 bytes); a client that sends more
// without a newline is not speaking the protocol.
const maxModeLine = 16

var (
	errModeIncomplete = errors.New("incomplete mode line")
	errBadMode        = errors.New(`expected "watch" or "attach" and a newline`)
)

// parseModeLine decides the mode line at the start of b. It returns the
// mode and the length of the line (newline included); errModeIncomplete when
// b is a proper prefix of a valid line; errBadMode as soon as b cannot
// become one. The match is byte-exact: no spaces, no CR, lower case.
func parseModeLine(b []byte) (Mode, int, error) {
	for _, m := range []Mode{Watch, Attach} {
		line := m.String() + "\n"
		switch {
		case bytes.HasPrefix(b, []byte(line)):
			return m, len(line), nil
		case len(b) < len(line) && bytes.HasPrefix([]byte(line), b):
			return 0, 0, errModeIncomplete
		}
	}
	return 0, 0, errBadMode
}

// readModeLine reads the mode line from r, at most maxModeLine bytes. It
// returns the mode and the bytes that arrived after the newline in the same
// reads: an attaching client may send its first input (a window size) right
// behind the mode line, and those bytes belong to the input stream.
func readModeLine(r io.Reader) (Mode, []byte, error) {
	var buf [maxModeLine]byte
	n := 0
	for {
		m, used, err := parseModeLine(buf[:n])
		if err == nil {
			return m, append([]byte(nil), buf[used:n]...), nil
		}
		if err != errModeIncomplete {
			return 0, nil, err
		}
		k, rerr := r.Read(buf[n:])
		n += k
		if rerr != nil && k == 0 {
			if rerr == io.EOF {
				return 0, nil, io.ErrUnexpectedEOF
			}
			return 0, nil, rerr
		}
	}
}
