// Why tsh keeps its own line editor rather than x/term's Terminal (compared
// with golang.org/x/term v0.48.0, which ctx already depends on; its
// history, completion callback and key set would do):
//
//   - Ctrl-C: Terminal.ReadLine returns io.EOF for Ctrl-C exactly as for
//     Ctrl-D on an empty line, and keeps the abandoned text as the line
//     being edited. tsh's ^C abandons the line and prompts again while ^D
//     ends the session (TestPTYInterruptAndErrors); with Terminal that
//     takes snooping the input for 0x03 and a new Terminal per ^C.
//   - Input meant for the next tool: Terminal reads the terminal 256 bytes
//     at a time into its own buffer, so what is typed or pasted after
//     Enter (a command and the input of the tool it runs) is consumed by
//     the editor and never reaches the tool, which shares tsh's stdin.
//     This editor reads one byte at a time and leaves it on the terminal
//     (TestREPLSharesStdinWithTools holds the same for plain reads).
//   - Long lines: Terminal drops keys past 4096 bytes without a word;
//     tsh takes lines up to MaxLine (1 MiB) and reports a longer one
//     (ErrLineTooLong), as its plain reader does.
//
// The raw mode is x/term's (MakeRaw, Restore) and the terminal test too
// (ptyterm.IsTerminal): this file is the editing itself.

package tsh

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"syscall"
	"unicode"
	"unicode/utf8"

	"golang.org/x/term"
)

// The REPL line editor: a small raw-mode editor in the spirit of linenoise.
//
//	Left/Right, Ctrl-B/Ctrl-F     move one character
//	Home/End, Ctrl-A/Ctrl-E       move to the start/end of the line
//	Up/Down, Ctrl-P/Ctrl-N        walk the history
//	Backspace, Delete             delete before/under the cursor
//	Ctrl-U, Ctrl-K, Ctrl-W        delete to the start, to the end, a word back
//	Ctrl-L                        clear the screen
//	Ctrl-C                        abandon the line, new prompt
//	Ctrl-D                        end of input on an empty line, else Delete
//	Enter                         run the line
//
// The terminal is in raw mode only while a line is read, so tools run on a
// terminal in its normal mode. Raw mode turns output post-processing off,
// so the editor ends a row with CR LF itself. Lines wrap over several rows; every character counts as one column.
// Control characters and other unprintable runes are not inserted, so what
// the editor echoes cannot drive the terminal.

// maxHistory bounds the history kept in memory. It is never written to
// disk: an agent's commands belong in its session events, not a dotfile.
const maxHistory = 1000

// defaultWidth is used when the terminal does not report its width.
const defaultWidth = 80

type editor struct {
	in, out *os.File
	saved   *term.State // the terminal's mode outside line reading
	history []string

	// State of the line being edited.
	prompt  []rune
	buf     []rune
	pos     int    // cursor index in buf
	size    int    // UTF-8 length of buf, bounded by MaxLine
	histIdx int    // index into history; len(history) is the line being typed
	typed   []rune // the line being typed while walking the history
	cursor  int    // screen offset of the cursor from the prompt start
	newline string // what ends a row
}

func newEditor(in, out *os.File) *editor { return &editor{in: in, out: out} }

type key uint8

const (
	keyIgnore key = iota
	keyRune
	keyEnter
	keyBackspace
	keyDelete
	keyLeft
	keyRight
	keyUp
	keyDown
	keyHome
	keyEnd
	keyInterrupt
	keyEOF
	keyKillStart
	keyKillEnd
	keyKillWord
	keyClear
)

// ctrlKeys maps control bytes to keys (the zero key for the others). An
// array, not a map: static data, where a map would be built at every
// start of every applet.
var ctrlKeys = [256]key{
	0x01: keyHome, 0x02: keyLeft, 0x03: keyInterrupt, 0x04: keyEOF,
	0x05: keyEnd, 0x06: keyRight, 0x08: keyBackspace, 0x0b: keyKillEnd,
	0x0c: keyClear, 0x0d: keyEnter, 0x0a: keyEnter, 0x0e: keyDown,
	0x10: keyUp, 0x15: keyKillStart, 0x17: keyKillWord, 0x7f: keyBackspace,
}

// ReadLine reads one line with editing. It returns io.EOF for Ctrl-D on an
// empty line or when the terminal goes away.
func (ed *editor) ReadLine(prompt string) (string, error) {
	fd := int(ed.in.Fd())
	if ed.saved == nil {
		// The mode found at the first prompt is the one every line ends
		// in, so a tool that dies leaving the terminal raw or silent does
		// not leave it that way for the next tool.
		st, err := term.GetState(fd)
		if err != nil {
			return "", err
		}
		ed.saved = st
	}
	// x/term's raw mode is set with TCSETS (not TCSETSF): keys typed
	// ahead while a tool ran are kept. It turns output processing off, so
	// a row ends in CR LF.
	if _, err := term.MakeRaw(fd); err != nil {
		return "", err
	}
	defer term.Restore(fd, ed.saved)
	ed.newline = "\r\n"
	ed.prompt = []rune(prompt)
	ed.reset()
	ed.write([]byte(prompt))
	for {
		k, r, err := ed.readKey()
		if err != nil {
			ed.write([]byte(ed.newline))
			return "", err
		}
		switch {
		case k == keyEnter:
			ed.moveTo(len(ed.buf))
			ed.write([]byte(ed.newline))
			line := string(ed.buf)
			ed.remember(line)
			return line, nil
		case k == keyInterrupt:
			ed.moveTo(len(ed.buf))
			ed.write([]byte("^C" + ed.newline))
			ed.reset()
			ed.write([]byte(prompt))
		case k == keyEOF && len(ed.buf) == 0:
			ed.write([]byte(ed.newline))
			return "", io.EOF
		default:
			ed.edit(k, r)
		}
	}
}

// edit applies one key that edits the line or moves in it (Ctrl-D on a
// non-empty line deletes under the cursor).
func (ed *editor) edit(k key, r rune) {
	switch k {
	case keyRune:
		ed.insert(r)
	case keyEOF, keyDelete:
		ed.deleteAt(ed.pos)
	case keyBackspace:
		if ed.pos > 0 {
			ed.pos--
			ed.deleteAt(ed.pos)
		}
	case keyLeft:
		ed.moveTo(ed.pos - 1)
	case keyRight:
		ed.moveTo(ed.pos + 1)
	case keyHome:
		ed.moveTo(0)
	case keyEnd:
		ed.moveTo(len(ed.buf))
	case keyUp:
		ed.walkHistory(-1)
	case keyDown:
		ed.walkHistory(+1)
	case keyKillStart:
		ed.setLine(ed.buf[ed.pos:], 0)
	case keyKillEnd:
		ed.setLine(ed.buf[:ed.pos], ed.pos)
	case keyKillWord:
		start := ed.pos
		for start > 0 && ed.buf[start-1] == ' ' {
			start--
		}
		for start > 0 && ed.buf[start-1] != ' ' {
			start--
		}
		ed.setLine(append(append([]rune{}, ed.buf[:start]...), ed.buf[ed.pos:]...), start)
	case keyClear:
		ed.write([]byte("\x1b[H\x1b[2J"))
		ed.cursor = 0
		ed.refresh()
	}
}

func (ed *editor) reset() {
	ed.buf, ed.pos, ed.size, ed.cursor = nil, 0, 0, 0
	ed.histIdx, ed.typed = len(ed.history), nil
}

// remember appends a non-empty line to the history unless it repeats the
// previous one.
func (ed *editor) remember(line string) {
	if line == "" || len(ed.history) > 0 && ed.history[len(ed.history)-1] == line {
		return
	}
	if len(ed.history) == maxHistory {
		ed.history = append(ed.history[:0], ed.history[1:]...)
	}
	ed.history = append(ed.history, line)
}

func (ed *editor) walkHistory(dir int) {
	i := ed.histIdx + dir
	if i < 0 || i > len(ed.history) {
		ed.bell()
		return
	}
	if ed.histIdx == len(ed.history) {
		ed.typed = append([]rune{}, ed.buf...)
	}
	ed.histIdx = i
	line := ed.typed
	if i < len(ed.history) {
		line = []rune(ed.history[i])
	}
	ed.setLine(line, len(line))
}

func (ed *editor) setLine(line []rune, pos int) {
	ed.buf = append([]rune{}, line...)
	ed.size = len(string(ed.buf))
	ed.pos = pos
	ed.refresh()
}

func (ed *editor) insert(r rune) {
	n := utf8.RuneLen(r)
	if n < 0 || ed.size+n > MaxLine {
		ed.bell()
		return
	}
	ed.buf = append(ed.buf, 0)
	copy(ed.buf[ed.pos+1:], ed.buf[ed.pos:])
	ed.buf[ed.pos] = r
	ed.pos++
	ed.size += n
	end := len(ed.prompt) + len(ed.buf)
	if ed.pos == len(ed.buf) && end%ed.width() != 0 {
		// Typing at the end of a line that does not wrap here: just echo.
		ed.write([]byte(string(r)))
		ed.cursor = end
		return
	}
	ed.refresh()
}

func (ed *editor) deleteAt(i int) {
	if i < 0 || i >= len(ed.buf) {
		return
	}
	ed.size -= utf8.RuneLen(ed.buf[i])
	ed.buf = append(ed.buf[:i], ed.buf[i+1:]...)
	ed.refresh()
}

func (ed *editor) moveTo(i int) {
	if i < 0 || i > len(ed.buf) {
		return
	}
	ed.pos = i
	ed.refresh()
}

func (ed *editor) width() int {
	w, _, err := term.GetSize(int(ed.out.Fd()))
	if err != nil || w <= 0 {
		return defaultWidth
	}
	return w
}

// refresh redraws prompt and line and places the cursor. It goes up to the
// row where the prompt starts, rewrites everything, clears what is left of
// an older, longer line, and moves back to the cursor position.
func (ed *editor) refresh() {
	w := ed.width()
	var b bytes.Buffer
	if rows := ed.cursor / w; rows > 0 {
		b.WriteString("\x1b[" + strconv.Itoa(rows) + "A")
	}
	b.WriteByte('\r')
	b.WriteString(string(ed.prompt))
	b.WriteString(string(ed.buf))
	b.WriteString("\x1b[J")
	end := len(ed.prompt) + len(ed.buf)
	if end > 0 && end%w == 0 {
		// The terminal holds the cursor on the last column until the next
		// character; start the new row explicitly so the arithmetic holds.
		b.WriteString("\r" + ed.newline)
	}
	target := len(ed.prompt) + ed.pos
	if up := end/w - target/w; up > 0 {
		b.WriteString("\x1b[" + strconv.Itoa(up) + "A")
	}
	b.WriteByte('\r')
	if col := target % w; col > 0 {
		b.WriteString("\x1b[" + strconv.Itoa(col) + "C")
	}
	ed.cursor = target
	ed.write(b.Bytes())
}

func (ed *editor) bell() { ed.write([]byte{'\a'}) }

func (ed *editor) write(b []byte) { _, _ = ed.out.Write(b) } // a gone terminal shows up as EOF on read

func (ed *editor) readByte() (byte, error) {
	var b [1]byte
	for {
		n, err := ed.in.Read(b[:])
		if n == 1 {
			return b[0], nil
		}
		if errors.Is(err, syscall.EIO) { // the other side of the pty closed
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
	}
}

// readKey reads one key: a byte, a UTF-8 sequence or an escape sequence.
// Bytes are read one at a time so nothing typed after Enter is consumed.
func (ed *editor) readKey() (key, rune, error) {
	c, err := ed.readByte()
	if err != nil {
		return keyIgnore, 0, err
	}
	switch {
	case c == 0x1b:
		return ed.readEscape()
	case c < 0x20 || c == 0x7f:
		return ctrlKeys[c], 0, nil
	case c < 0x80:
		return keyRune, rune(c), nil
	}
	seq := []byte{c}
	for !utf8.FullRune(seq) {
		c, err := ed.readByte()
		if err != nil {
			return keyIgnore, 0, err
		}
		seq = append(seq, c)
	}
	r, _ := utf8.DecodeRune(seq)
	if !unicode.IsPrint(r) || r == utf8.RuneError {
		return keyIgnore, 0, nil
	}
	return keyRune, r, nil
}

// readEscape decodes the CSI (ESC [) and SS3 (ESC O) sequences of the
// cursor and editing keys; anything else is read to its end and ignored.
func (ed *editor) readEscape() (key, rune, error) {
	intro, err := ed.readByte()
	if err != nil || intro != '[' && intro != 'O' {
		return keyIgnore, 0, err
	}
	var params []byte
	for {
		c, err := ed.readByte()
		if err != nil {
			return keyIgnore, 0, err
		}
		if c >= 0x40 && c <= 0x7e {
			return escapeKey(c, string(params)), 0, nil
		}
		if len(params) < 16 {
			params = append(params, c)
		}
	}
}

func escapeKey(final byte, params string) key {
	switch final {
	case 'A':
		return keyUp
	case 'B':
		return keyDown
	case 'C':
		return keyRight
	case 'D':
		return keyLeft
	case 'H':
		return keyHome
	case 'F':
		return keyEnd
	case '~':
		switch params {
		case "1", "7":
			return keyHome
		case "4", "8":
			return keyEnd
		case "3":
			return keyDelete
		}
	}
	return keyIgnore
}
