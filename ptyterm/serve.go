package ptyterm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/fsops/proc"
)

// DefaultSize is the window size of a terminal when neither the caller nor
// a console terminal gives one.
var DefaultSize = Winsize{Rows: 24, Cols: 80}

// drainAfterExit bounds how long output is still read after the command
// exited: until the PTY reports EOF, which it does at once unless a
// background process of the command still holds the terminal open.
const drainAfterExit = time.Second

// Config describes one terminal for Serve.
type Config struct {
	// Cmd is the command to run on the PTY, not yet started. Serve sets its
	// standard streams to the PTY and makes it a session leader with the
	// PTY as controlling terminal (Setsid, Setctty); other SysProcAttr
	// fields are kept.
	Cmd *exec.Cmd
	// Socket is the path of the terminal socket; empty for none.
	Socket string
	// Owner is the uid that may connect besides root (uid 0).
	Owner int
	// Secret, when set, is what every socket client must send first, in a
	// line "secret HEX" (secret.go); Serve keeps it at SecretPath(Socket)
	// while it listens.
	Secret string
	// Events is the terminal record to append to; empty for none.
	Events string
	// RecordLimit bounds the bytes this run appends to Events (0: no
	// bound): the line that would pass it is replaced by one
	// record.stopped event, and nothing more is recorded. The command,
	// the clients and the console go on.
	RecordLimit int64
	// OnRecordLimit, if set, is called once when RecordLimit stops the
	// record, from the goroutine that writes it: it must not wait for the
	// terminal.
	OnRecordLimit func()
	// ID names the terminal in the process.start event; may be empty.
	ID string
	// Size is the initial window size; a zero field is taken from the
	// console terminal, else from DefaultSize.
	Size Winsize

	// Console is what to do with ConsoleIn and ConsoleOut (see
	// ConsoleMode). In ConsoleTTY mode ConsoleIn must be an *os.File on a
	// terminal. Output to ConsoleOut is written in step with the PTY: a
	// console that does not keep up holds the command back, as any
	// terminal does; socket clients never do.
	Console    ConsoleMode
	ConsoleIn  io.Reader
	ConsoleOut io.Writer
	// ConsoleRaw relays the output to a ConsoleOut that is a terminal as
	// it is. By default a person's terminal gets it through a
	// ControlFilter, as a watcher's does; a ConsoleOut that is no
	// terminal (a pipe, a file) always gets the bytes as they are.
	ConsoleRaw bool

	// Signals are forwarded to the command's process group (the caller
	// subscribes to SIGTERM, SIGHUP, ... with signal.Notify).
	Signals <-chan os.Signal
	// Log receives one-line diagnostics, such as a failed record write;
	// may be nil.
	Log io.Writer
	// Started, if set, is called once the socket listens and the command
	// runs.
	Started func(pid int)
	// Start, if set, starts the command instead of cmd.Start (the run host
	// starts its init from a thread inside the run's cgroup).
	Start func(cmd *exec.Cmd) error
	// TTYOwner, when set, is the uid and gid the PTY's slave is given to
	// before the command starts: a command that runs as another uid than
	// ctxterm (an agent with a uid of its own) can then reopen its own
	// terminal (/dev/stdout, /proc/self/fd/0).
	TTYOwner *[2]int
	// PTY, when set, is the terminal Cmd was started on already (OpenPTY):
	// Serve serves it instead of opening one and starting Cmd.
	PTY *PTY
}

// SetupError is an error that happened before the command ran, with the
// exit status ctxterm reports for it: 1 for the socket, the record or the
// PTY, and when the command cannot be started, proc.StartFailure's: 127
// when it is not found, 126 when it cannot be executed.
type SetupError struct {
	Code int
	Err  error
}

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// Serve runs cfg.Cmd on a new PTY and owns the PTY until the command exits:
// it serves the terminal socket, records the session, drives the local
// console, and returns the command's exit status (128+N when it died of
// signal N). When Serve returns, every client has been closed, the socket
// file removed, and process.exit recorded. A *SetupError is returned when
// the command could not be started.
func Serve(cfg Config) (int, error) {
	if cfg.Cmd == nil {
		return 1, &SetupError{1, errors.New("no command")}
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "ctxterm: "+format+"\n", args...)
		}
	}

	ttyIn, size, err := consoleTerminal(cfg)
	if err != nil {
		return cfg.setupFailed(err)
	}

	rec, err := openRecorder(cfg.Events, cfg.RecordLimit, cfg.OnRecordLimit, func(err error) { logf("%v", err) })
	if err != nil {
		return cfg.setupFailed(err)
	}
	var sock *terminalSocket
	if cfg.Socket != "" {
		if sock, err = listenSocket(cfg.Socket, cfg.Secret); err != nil {
			rec.discard()
			return cfg.setupFailed(err)
		}
	}
	master, pid, veof, err := startServed(cfg, size)
	if err != nil {
		if sock != nil {
			sock.close()
		}
		rec.discard()
		var se *SetupError
		if !errors.As(err, &se) {
			se = &SetupError{proc.ExitFailure, err}
		}
		return se.Code, se
	}
	rec.Event(Event{Type: EventStart, Terminal: cfg.ID, PID: pid, Rows: size.Rows, Cols: size.Cols})

	h := newHub(master, rec, size)
	if sock != nil {
		go sock.serve(h, cfg.Owner)
	}
	con, err := startConsole(cfg, ttyIn, h, veof)
	if err != nil {
		logf("console: %v", err)
	}

	waited := make(chan *os.ProcessState, 1)
	go func() {
		_ = cfg.Cmd.Wait() // the state carries the status; a non-zero exit is not an error here
		waited <- cfg.Cmd.ProcessState
	}()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		copyOutput(master, h, rec, con, logf)
	}()
	if cfg.Started != nil {
		cfg.Started(pid)
	}

	state := awaitExit(cfg.Signals, pid, waited)
	select {
	case <-readDone:
	case <-time.After(drainAfterExit):
	}
	_ = master.Close() // unblocks the output reader and any input writer
	<-readDone
	if sock != nil {
		sock.close()
	}
	con.stop()
	h.shutdown()

	return recordExit(rec, state, logf), nil
}

// setupFailed is Serve's answer when it cannot serve the command: a
// terminal opened ahead is closed (the caller ends the command started
// on it).
func (cfg Config) setupFailed(err error) (int, error) {
	if cfg.PTY != nil {
		cfg.PTY.Close()
	}
	return 1, &SetupError{1, err}
}

// startServed starts cfg.Cmd on a new PTY, or takes the one it was
// started on ahead (cfg.PTY).
func startServed(cfg Config, size Winsize) (*os.File, int, byte, error) {
	if p := cfg.PTY; p != nil && cfg.Cmd.Process != nil {
		p.Started()
		return p.master, cfg.Cmd.Process.Pid, p.veof, nil
	}
	return startOnPTY(cfg.Cmd, size, cfg.TTYOwner, cfg.Start)
}

// consoleTerminal is the console's terminal in ConsoleTTY mode (nil in
// the others) and the size the PTY starts with: the console's, else
// DefaultSize, with cfg.Size's rows and columns over either.
func consoleTerminal(cfg Config) (*os.File, Winsize, error) {
	var ttyIn *os.File
	if cfg.Console == ConsoleTTY {
		f, ok := cfg.ConsoleIn.(*os.File)
		if !ok || !IsTerminal(f) {
			return nil, Winsize{}, errors.New("console input is not a terminal")
		}
		ttyIn = f
	}
	size := DefaultSize
	if ttyIn != nil {
		if r, c, err := getWinsize(ttyIn); err == nil && r > 0 && c > 0 {
			size = Winsize{r, c}
		}
	}
	if cfg.Size.Rows != 0 {
		size.Rows = cfg.Size.Rows
	}
	if cfg.Size.Cols != 0 {
		size.Cols = cfg.Size.Cols
	}
	return ttyIn, size, nil
}

// awaitExit forwards signals to the command's process group (it leads
// its own) until the command has exited.
func awaitExit(signals <-chan os.Signal, pid int, waited <-chan *os.ProcessState) *os.ProcessState {
	for {
		select {
		case sig := <-signals:
			if s, ok := sig.(syscall.Signal); ok {
				_ = unix.Kill(-pid, s)
			}
		case state := <-waited:
			return state
		}
	}
}

// recordExit records the last output and the command's exit, closes the
// record and returns the exit status.
func recordExit(rec *recorder, state *os.ProcessState, logf func(string, ...any)) int {
	code, sig := exitStatus(state)
	rec.FlushOutput()
	ev := Event{Type: EventExit, ExitCode: &code}
	if sig != 0 {
		ev.Signal = unix.SignalName(sig)
	}
	rec.Event(ev)
	if err := rec.Close(); err != nil {
		logf("%v", err)
	}
	return code
}

// exitStatus maps a wait status to a shell-style exit code.
func exitStatus(state *os.ProcessState) (int, syscall.Signal) {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return proc.ExitCode(state), ws.Signal()
	}
	return state.ExitCode(), 0
}

// copyOutput reads the PTY until EOF and hands the output to the clients,
// the record and the console. On Linux the master reads EIO once no
// process holds the slave: that is the PTY's EOF, not an error.
//
// A PTY master yields at most 4 KiB per read, and the program writing to
// the terminal waits while that small buffer is full, so throughput is set
// by how soon the reader reads again. The reader therefore does nothing but
// read: each read lands in a fresh part of a slab (see slab), never written
// again while anyone holds it, and is passed to deliverOutput, which fans
// it out.
func copyOutput(master *os.File, h *hub, rec *recorder, con *console, logf func(string, ...any)) {
	const minRead = 64 << 10
	chunks := make(chan chunk, 256)
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		deliverOutput(chunks, h, rec, con, logf)
	}()
	s := getSlab()
	for {
		if len(s.mem)-s.used < minRead {
			s.unref() // the reader's hold; the chunks in flight keep theirs
			s = getSlab()
		}
		n, err := master.Read(s.mem[s.used:])
		if n > 0 {
			c := chunk{s.mem[s.used : s.used+n : s.used+n], s, s.used}
			c.ref()
			chunks <- c
			s.used += n
		}
		if err != nil {
			s.unref()
			close(chunks)
			<-delivered
			return
		}
	}
}

// deliverOutput passes PTY output to the scrollback and clients, the record
// and the console. While output streams it delivers at most once per
// streamBatch, joining the chunks read meanwhile, so the reader's hand-over
// is a buffered channel send instead of a goroutine wake-up per read; the
// first output after a pause (a keystroke's echo) goes out at once. Each
// chunk received holds its slab until it is delivered.
func deliverOutput(chunks <-chan chunk, h *hub, rec *recorder, con *console, logf func(string, ...any)) {
	var last time.Time
	for {
		if since := time.Since(last); since < streamBatch {
			time.Sleep(streamBatch - since)
		}
		batch, ok := <-chunks
		if !ok {
			return
		}
		for more := true; more && len(batch.p) < maxDelivery; {
			select {
			case c, ok := <-chunks:
				if !ok {
					deliverBatch(batch, h, rec, con, logf)
					return
				}
				if joined, ok := join(batch, c); ok {
					batch = joined
					c.unref() // the batch holds the slab once
				} else {
					deliverBatch(batch, h, rec, con, logf)
					batch = c
				}
			default:
				more = false
			}
		}
		deliverBatch(batch, h, rec, con, logf)
		last = time.Now()
	}
}

// maxDelivery bounds the output one delivery gathers.
const maxDelivery = 1 << 20

// deliverBatch hands c to the hub, the record and the console, and drops
// the delivery's hold on its slab: the clients and the record take their
// own. c.p has no capacity beyond its length: no append can reach the
// rest of the slab.
func deliverBatch(c chunk, h *hub, rec *recorder, con *console, logf func(string, ...any)) {
	h.Broadcast(c)
	rec.output(c)
	con.write(c.p, logf)
	c.unref()
}

// descriptor returns f's descriptor without File.Fd, which would switch a
// non-blocking terminal (shared with the shell that started us) to
// blocking mode.
func descriptor(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(u uintptr) { fd = int(u) })
	}
	return fd
}
