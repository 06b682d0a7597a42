package tsh

import (
	"bufio"
	"errors"
	"io"
	"os"
	"syscall"

	"ctx/applets/cli"
	"ctx/ptyterm"
)

// Prompt is the REPL prompt.
const Prompt = "tsh> "

// lineReader reads one REPL line. It returns io.EOF at the end of input and
// ErrLineTooLong for a line over MaxLine (whose rest it has discarded).
type lineReader interface {
	ReadLine(prompt string) (string, error)
}

// REPL reads and runs commands until end of input or exit, and returns the
// status of the last command (or exit's CODE). A bad line or a failed
// command prints "tsh: ..." and the loop goes on.
func (sh *Shell) REPL() int {
	sh.interactive = true
	r := newLineReader(sh.env)
	for {
		line, err := r.ReadLine(Prompt)
		switch {
		case err == io.EOF:
			return sh.last
		case errors.Is(err, ErrLineTooLong):
			sh.errorf("%v", err)
			sh.last = cli.Usage
			continue
		case err != nil:
			sh.errorf("reading commands: %v", err)
			return cli.Failure
		}
		if sh.echo && !ptyterm.IsTerminal(sh.env.Stdin) {
			// A script's reader sees each command above its output, the
			// way a person at the prompt would have typed it (sh -v).
			io.WriteString(sh.env.Stdout, Prompt+line+"\n")
		}
		words, err := SplitWords(line)
		if err != nil {
			sh.errorf("%v", err)
			sh.last = cli.Usage
			continue
		}
		if len(words) == 0 {
			continue
		}
		sh.last = sh.Execute(words)
		if sh.exiting {
			return sh.last
		}
	}
}

// newLineReader picks the line editor when stdin and stdout are both a
// terminal, else plain line reads. Plain reads prompt on stderr when only
// stdin is a terminal (stdout redirected), and not at all when stdin is a
// pipe or a file.
func newLineReader(e *Env) lineReader {
	in, _ := e.Stdin.(*os.File)
	if in != nil && ptyterm.IsTerminal(in) {
		if out, ok := e.Stdout.(*os.File); ok && ptyterm.IsTerminal(out) {
			return newEditor(in, out)
		}
		return &plainReader{file: in, prompt: e.Stderr}
	}
	if in != nil {
		return &plainReader{file: in}
	}
	return &plainReader{buffered: bufio.NewReader(e.Stdin)}
}

// plainReader reads lines without editing. From a file it reads one byte
// at a time, like sh: a tool that tsh runs shares that stdin and must find
// the input after the command line still unread.
type plainReader struct {
	file     *os.File
	buffered *bufio.Reader // when stdin is not a file (in-process tests)
	prompt   io.Writer     // nil: no prompt
	eof      bool
}

func (p *plainReader) readByte() (byte, error) {
	if p.buffered != nil {
		return p.buffered.ReadByte()
	}
	var b [1]byte
	for {
		n, err := p.file.Read(b[:])
		if n == 1 {
			return b[0], nil
		}
		if errors.Is(err, syscall.EIO) { // a terminal whose other side closed
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
	}
}

func (p *plainReader) ReadLine(prompt string) (string, error) {
	if p.eof {
		return "", io.EOF
	}
	if p.prompt != nil {
		io.WriteString(p.prompt, prompt)
	}
	var line []byte
	tooLong := false
	for {
		c, err := p.readByte()
		if err != nil {
			if err != io.EOF {
				return "", err
			}
			// A last line without a newline still counts.
			p.eof = true
			if tooLong {
				return "", ErrLineTooLong
			}
			if len(line) == 0 {
				return "", io.EOF
			}
			return string(line), nil
		}
		if c == '\n' {
			if tooLong {
				return "", ErrLineTooLong
			}
			return string(line), nil
		}
		if len(line) < MaxLine {
			line = append(line, c)
		} else {
			tooLong = true
		}
	}
}
