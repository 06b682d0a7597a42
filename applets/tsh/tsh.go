// Package tsh is the tool shell: the one terminal capability an agent gets.
// It is not a host shell. It resolves the first word of a command only
// through CTX_PATH (never PATH, never the current directory) and runs only
// the tool object found there, with argv preserved and stdio inherited.
// Around that it offers a few builtins to discover tools and to keep their
// metadata in a per-process context (load, pin), a W-TinyLFU cache of
// resolved paths, and an interactive REPL with a small line editor.
//
// Executing a tool needs an agent context (see agentContext) and passes the
// authority check in authorize.go; a standalone human tsh lists and
// inspects but never executes.
//
// A Shell is not safe for concurrent use: one tsh process runs one.
package tsh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/policy"
)

// Env is the I/O and environment tsh runs with (the applet adapter fills
// it from the applet's Env). Stdin, Stdout and Stderr are handed to tools
// as they are, so they should be the process's *os.File values.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Tools is the tool runtime of the binary tsh is part of (package
	// applets passes its own): nil runs every tool as a process of its
	// own and records every refusal itself.
	Tools Tools

	// authorize replaces the authority check (authorizeExec). Only this
	// package's tests set it, to exercise the exec mechanics with an
	// allowing check; unexported so that no caller outside can.
	authorize func(*Env, fsops.Root, fsops.ToolHit) (errno, layer string, ok bool)
}

// Tools is what tsh needs of the tool runtime it runs in. It is an explicit
// dependency, passed in Env, so that tsh never reaches back into the
// package that starts it.
type Tools interface {
	// InProcess runs a tool that this very binary implements without
	// starting a process: busybox's NOFORK. tsh asks it only for one
	// command (`tsh TOOL ARGS`), never in the REPL, and only when the
	// authorized executable is the running binary's own inode, so the code
	// that runs is exactly the code the exec would have run, with the
	// same argv, stdio and environment. It reports false when it does not
	// implement the tool in-process.
	InProcess(c ToolCall) (int, bool)
	// Brokered asks the run host's broker to run the call, as the tool's
	// own process would first thing (ctx man sandbox, BROKER): tsh saves
	// that process. It reports false outside a run with a broker and for
	// terminal tools (bash, tmux, zellij), which keep tsh's terminal and
	// are executed.
	Brokered(c ToolCall) (int, bool)
	// HostRecords has the run host decide and record a call tsh refused
	// (broker.Decide); false without a broker.
	HostRecords(getenv func(string) string, tool string) bool
}

// ToolCall is one call tsh hands to Tools: the tool's name, the executable
// it was authorized as, its arguments and environment, and its stdio.
type ToolCall struct {
	Name, Object   string
	Args, Env      []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exit codes of tsh itself are package cli's (ctx man tsh, EXIT STATUS): 1
// a builtin failed, 2 bad arguments or a bad REPL line, .tshrc or config,
// 13 the authority check refused the tool, 69 no agent context, 126 found
// but could not be executed, 127 no such tool in CTX_PATH. A tool's own
// exit code is passed through.

// Shell is the state of one tsh process.
type Shell struct {
	env    *Env
	root   fsops.Root
	dirs   []string // the CTX_PATH directories, in search order
	config policy.TshConfig
	loaded *Context
	cache  *TinyLFU[cachedTool]

	interactive bool // reading commands from the REPL
	echo        bool // -x: print "tsh> LINE" before running each REPL line
	exiting     bool // the exit builtin ran
	last        int  // status of the last command
}

// Run is the tsh applet: `tsh [--root DIR] [--list]`, `tsh TOOL ARGS...`,
// `tsh BUILTIN ARGS...`, `tsh '{"args":[...]}'` (the tool-call form) and,
// without a command, the REPL.
func Run(e *Env, args []string) int {
	opts, words, err := parseOptions(args)
	if err != nil {
		cli.Usagef(e.Stderr, "tsh", "%v", err)
		return cli.Usage
	}
	sh, code := NewShell(e, fsops.SelectRoot(opts.root, e.Getenv))
	if sh == nil {
		return code
	}
	sh.echo = opts.echo
	switch {
	case opts.list:
		if len(words) > 0 {
			sh.errorf("--list takes no command")
			return cli.Usage
		}
		return sh.builtinTools(nil)
	case len(words) > 0:
		return sh.Execute(words)
	}
	return sh.REPL()
}

// NewShell reads the configuration and chooses CTX_PATH for root. On a bad
// .tshrc or config it prints the error and returns nil and the exit code.
func NewShell(e *Env, root fsops.Root) (*Shell, int) {
	sh := &Shell{env: e, root: root}
	cfg, err := readConfig(root)
	if err != nil {
		sh.errorf("%v", err)
		return nil, cli.Usage
	}
	dirs, err := ToolPath(e, root)
	if err != nil {
		sh.errorf("%v", err)
		return nil, cli.Usage
	}
	sh.config, sh.dirs = cfg, dirs
	sh.loaded = NewContext(cfg.MaxLoadedTools)
	sh.cache = NewTinyLFU[cachedTool](cfg.CacheCapacity, cfg.WindowPercent)
	return sh, cli.OK
}

// parseOptions takes tsh's own options, which come before the command:
// everything from the first non-option word on belongs to the command, so
// `tsh fs.read --root x` passes --root to fs.read. A single argument that
// is a JSON object is the tool-call form {"args":[WORD...]}: its words are
// the command, with no options.
func parseOptions(args []string) (opts options, words []string, err error) {
	if len(args) == 1 && strings.HasPrefix(args[0], "{") {
		words, err = parseToolCall(args[0])
		return options{}, words, err
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, args[i+1:], nil
		case a == "--list":
			opts.list = true
		case a == "-x" || a == "--echo":
			opts.echo = true
		case a == "--root" || a == "-r":
			if i+1 == len(args) {
				return options{}, nil, fmt.Errorf("option %s needs a directory", a)
			}
			i++
			opts.root = args[i]
		case strings.HasPrefix(a, "--root="):
			opts.root = strings.TrimPrefix(a, "--root=")
		case strings.HasPrefix(a, "-") && a != "-":
			return options{}, nil, fmt.Errorf("unknown option %s", a)
		default:
			return opts, args[i:], nil
		}
	}
	return opts, nil, nil
}

// options are tsh's own options.
type options struct {
	root string
	list bool
	echo bool // -x: the REPL prints each command before running it
}

// parseToolCall decodes {"args":["which","fs.read"]}. Other keys are
// ignored (the tsh schema allows additional properties).
func parseToolCall(text string) ([]string, error) {
	var in struct {
		Args *[]string `json:"args"`
	}
	if err := json.Unmarshal([]byte(text), &in); err != nil {
		return nil, fmt.Errorf("invalid tool input: %v", err)
	}
	if in.Args == nil || len(*in.Args) == 0 {
		return nil, errors.New(`invalid tool input: "args" must be a non-empty array of strings`)
	}
	return *in.Args, nil
}

// readConfig reads <root>/tool/tsh.d/config; a missing file means the
// defaults. Both tsh and tsh.config use this one file (DESIGN §14), not the
// control directory of whichever tsh CTX_PATH happens to find.
func readConfig(root fsops.Root) (policy.TshConfig, error) {
	b, err := ReadConfigFile(root)
	if errors.Is(err, fs.ErrNotExist) {
		return policy.DefaultTshConfig(), nil
	}
	if err != nil {
		return policy.TshConfig{}, err
	}
	cfg, err := policy.ParseTshConfig(b)
	if err != nil {
		return policy.TshConfig{}, fmt.Errorf("%s: %w", ConfigPath(root), err)
	}
	return cfg, nil
}

// ReadConfigFile returns the bytes of <root>/tool/tsh.d/config, bounded,
// with neither the file nor tsh.d followed if it is a symlink. A missing
// file or directory is an error wrapping fs.ErrNotExist.
func ReadConfigFile(root fsops.Root) ([]byte, error) {
	path := ConfigPath(root)
	dir := filepath.Dir(path)
	st, err := os.Lstat(dir)
	switch {
	case err != nil:
		return nil, err
	case st.Mode()&fs.ModeSymlink != 0:
		return nil, &os.PathError{Op: "open", Path: dir, Err: fsops.ErrSymlink}
	case !st.IsDir():
		return nil, &os.PathError{Op: "open", Path: dir, Err: syscall.ENOTDIR}
	}
	return fsops.ReadControl(path)
}

// ConfigPath is <root>/tool/tsh.d/config.
func ConfigPath(root fsops.Root) string {
	return filepath.Join(root.ToolDir(), "tsh.d", "config")
}

// errorf prints "tsh: message" to stderr, escaped for the terminal
// (cli.Errorf).
func (sh *Shell) errorf(format string, args ...any) {
	cli.Errorf(sh.env.Stderr, "tsh", format, args...)
}

// deniedf prints the line of a refusal (exit 13): errorf's line, marked
// with cli.DeniedPrefix so that it cannot be mistaken for a tool that
// exits 13 on its own.
func (sh *Shell) deniedf(format string, args ...any) {
	cli.Deniedf(sh.env.Stderr, "tsh", format, args...)
}
