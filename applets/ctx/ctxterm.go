package ctx

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"ctx/applets/cli"
	"ctx/ptyterm"
)

// RunCtxterm is the ctxterm applet: it runs a command on a new PTY that it
// owns until the command exits, serving the terminal socket and recording
// the session (ptyterm.Serve), and exits with the command's status.
// `ctxterm --replay FILE` prints a record's PTY output instead. --raw
// relays the output to a terminal unfiltered (ptyterm.ControlFilter).
func RunCtxterm(e *cli.Env, args []string) int {
	var socket, events, owner, rows, cols, id, replay string
	var noConsole, raw bool
	f := cli.NewFlags()
	f.String("socket", &socket)
	f.String("events", &events)
	f.String("owner", &owner)
	f.String("rows", &rows)
	f.String("cols", &cols)
	f.String("id", &id)
	f.String("replay", &replay)
	f.Bool("no-console", &noConsole)
	f.Bool("raw", &raw)
	if _, code, ok := cli.ParseArgs(e, f, args, 0, 0); !ok {
		return code
	}
	if replay != "" {
		if socket != "" || events != "" || f.Command != nil {
			return cli.UsageError(e, "--replay takes no other option or command")
		}
		return ctxtermReplay(e, replay, raw)
	}
	if socket == "" || events == "" {
		return cli.UsageError(e, "--socket and --events are required")
	}
	if strings.ContainsAny(id, "/\n") || len(id) > 255 {
		return cli.UsageError(e, "--id %q: must be at most 255 bytes without '/' or newline", id)
	}
	cfg := ptyterm.Config{Socket: socket, Events: events, ID: id, Owner: os.Getuid(), Log: e.Stderr}
	var err error
	if owner != "" {
		if cfg.Owner, err = strconv.Atoi(owner); err != nil || cfg.Owner < 0 {
			return cli.UsageError(e, "--owner %q: not a uid", owner)
		}
	}
	if cfg.Size.Rows, err = parseWindowDim(rows); err != nil {
		return cli.UsageError(e, "--rows: %v", err)
	}
	if cfg.Size.Cols, err = parseWindowDim(cols); err != nil {
		return cli.UsageError(e, "--cols: %v", err)
	}

	argv := f.Command
	if len(argv) == 0 {
		// The seed: ctxterm starts tsh by default, the tsh of this binary.
		argv = []string{"tsh"}
		cfg.Cmd = &exec.Cmd{Path: "/proc/self/exe", Args: argv}
	} else {
		cfg.Cmd = exec.Command(argv[0], argv[1:]...)
	}
	if !noConsole {
		cfg.Console = ptyterm.ConsoleModeFor(e.Stdin)
		cfg.ConsoleIn, cfg.ConsoleOut, cfg.ConsoleRaw = e.Stdin, e.Stdout, raw
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	// With SIGPIPE caught, a console write to a closed pipe fails with EPIPE
	// instead of killing ctxterm, which must outlive its console to record
	// the exit and remove the socket. (Caught, not ignored: an ignored
	// signal would stay ignored in the command.)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	cfg.Signals = sigs

	code, err := ptyterm.Serve(cfg)
	if err != nil {
		var se *ptyterm.SetupError
		if errors.As(err, &se) {
			code = se.Code
		}
		return cli.Fail(e, code, "%v", err)
	}
	return code
}

// parseWindowDim parses a window dimension: empty (unset) or 1..65535.
func parseWindowDim(s string) (uint16, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, errors.New("must be a number from 1 to 65535")
	}
	return uint16(n), nil
}

// ctxtermReplay is ctxterm --replay FILE: a record holds what the agent
// wrote, so on a person's terminal it is shown as a watcher sees it
// (ptyterm.ControlFilter), unless raw.
func ctxtermReplay(e *cli.Env, file string, raw bool) int {
	out := e.Stdout
	if !raw && ptyterm.IsTerminal(out) {
		out = ptyterm.NewControlFilterWriter(out)
	}
	if err := ptyterm.Replay(file, out); err != nil {
		return cli.Fail(e, cli.Failure, "%v", err)
	}
	return cli.OK
}
