package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ctx/fsops"
	"ctx/fsops/proc"
	"ctx/policy"
	"ctx/policy/sandboxplan"
)

// applyWalls puts the walls that stand behind the mounts on the init's
// locked thread, from which the agent's program is forked and inherits
// them: Landlock (the plan's read/write split, execute rights from perm x,
// no signals or abstract sockets out of the sandbox), then the seccomp
// filter. exe is the program about to start: without perm x it is, with
// its ELF interpreter, the one file outside ctx's tools that may run.
func applyWalls(plan *sandboxplan.Plan, exe string) error {
	var rules []LandlockRule
	for _, a := range plan.Access {
		// A namespace sandbox connects to any socket its mounts show;
		// iso landlock where its plan says.
		connect := a.Connect || plan.Iso != string(policy.IsoLandlock)
		rules = append(rules, LandlockRule{Path: a.Path, Write: a.Write, Exec: a.Exec && plan.ExecAll, Dev: a.Dev, Optional: a.Optional, Connect: connect, KeepDirs: a.KeepDirs})
	}
	if !plan.ExecAll {
		for _, p := range plan.ExecPaths {
			rules = append(rules, LandlockRule{Path: p, Exec: true, Optional: true})
		}
		for _, p := range programFiles(exe) {
			rules = append(rules, LandlockRule{Path: p, Exec: true, Optional: true})
		}
	}
	// A terminal the agent was given (ctxterm's PTY, from the host's
	// devpts) stays reachable as /dev/stdout and /dev/tty's target.
	for fd := 0; fd < 3; fd++ {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
			fd := fd
			rules = append(rules, LandlockRule{Inherited: &fd, Write: true, Dev: true})
		}
	}
	// iso landlock's egress: TCP to the run host's proxy port alone,
	// which only Landlock's network rules (ABI 4) can say; without them
	// the run keeps unix sockets only.
	opts := SeccompOptions{NoNetwork: plan.NoNetwork}
	var port uint16
	if e := plan.Egress; e != nil && e.ConnectPort != 0 && plan.DenyTCP {
		port, opts.TCPOnly = e.ConnectPort, true
	}
	abi, _, err := ApplyLandlock(LandlockPolicy{Rules: rules, DenyTCP: plan.DenyTCP, ConnectTCP: port, Scope: true})
	if err != nil && abi > 0 {
		return &Error{"applying the Landlock ruleset", err}
	}
	if opts.TCPOnly && abi < landlockABINet {
		opts.NoNetwork, opts.TCPOnly = true, false
	}
	if err := InstallSeccompWith(opts); err != nil {
		return &Error{"installing the seccomp filter", err}
	}
	// Below Landlock ABI 9 nothing else keeps pathname unix sockets
	// closed to iso landlock: the run host's gate does.
	if plan.UnixGate && abi < LandlockABIResolveUnix {
		if err := startUnixGate(plan); err != nil {
			return &Error{"starting the unix gate", err}
		}
	}
	return nil
}

// programFiles are the files executing exe opens for execution: exe
// itself and, for a dynamic ELF program, its interpreter, each with its
// symlinks resolved (Landlock rules hold real files).
func programFiles(exe string) []string {
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return nil
	}
	files := []string{real}
	if interp := elfInterp(real); interp != "" {
		if interp, err := filepath.EvalSymlinks(interp); err == nil {
			files = append(files, interp)
		}
	}
	return files
}

// ConfineApplet is the hidden applet an iso shared run starts its program
// through: no namespaces there, but the program still runs without new
// privileges and behind the seccomp filter.
const ConfineApplet = "ctx-confine"

// The network word, ConfineApplet's first argument: with no network
// namespace to shut the network out, the filter itself does, unless the
// agent holds network:default connect (SeccompOptions.NoNetwork).
const (
	ConfineNetwork   = "--network=allow"
	ConfineNoNetwork = "--network=deny"
)

// RunConfine is that applet: argv is NETWORK PATH ARGV0 ARGS..., NETWORK
// one of ConfineNetwork and ConfineNoNetwork, always present, so no
// program name is ever read as an option. On success it does not return
// (the program replaces it).
func RunConfine(argv []string, stderr io.Writer) int {
	if len(argv) < 3 || (argv[0] != ConfineNetwork && argv[0] != ConfineNoNetwork) {
		fmt.Fprintf(stderr, "ctx: %s: usage: %s %s|%s PATH ARGV0 [ARGS...]\n", ConfineApplet, ConfineApplet, ConfineNetwork, ConfineNoNetwork)
		return proc.ExitUsage
	}
	opts := SeccompOptions{NoNetwork: argv[0] == ConfineNoNetwork}
	argv = argv[1:]
	runtime.LockOSThread()
	fsops.CloseInheritedOnExec()
	// The run capability is the one descriptor the run host passes on
	// purpose (CTX_RUN_FD): it stays open across the exec.
	if fd, err := strconv.Atoi(os.Getenv("CTX_RUN_FD")); err == nil && fd == RunFD {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: setting no_new_privs: %v\n", err)
		return proc.ExitUnavailable
	}
	env := os.Environ()
	if file, ok := os.LookupEnv(ConfineLandlockEnv); ok {
		env = withoutEnv(env, ConfineLandlockEnv)
		if err := confineLandlock(file); err != nil {
			fmt.Fprintf(stderr, "ctx: sandbox: protected paths: %v\n", err)
			return proc.ExitUnavailable
		}
	}
	if err := InstallSeccompWith(opts); err != nil {
		fmt.Fprintf(stderr, "ctx: sandbox: installing the seccomp filter: %v\n", err)
		return proc.ExitUnavailable
	}
	err := unix.Exec(argv[0], argv[1:], env)
	fmt.Fprintf(stderr, "ctx: sandbox: starting %s: %v\n", argv[0], err)
	return proc.StartFailure(err)
}

// ConfineLandlockEnv names, in ConfineApplet's environment, the file of
// Landlock write rules the run host decided for an iso shared run with
// protected paths (WriteConfineRules): the applet applies them, write
// rights alone handled, before the seccomp filter, removes the file and
// leaves the variable out of the program's environment. Without it the
// applet applies no Landlock.
const ConfineLandlockEnv = "CTX_CONFINE_LANDLOCK"

// maxConfineRules bounds the rules file: 65536 rules of a path each.
const maxConfineRules = 64 << 20

// WriteConfineRules writes the write rules of an iso shared run to file,
// each an absolute path ended by a NUL byte, readable by the caller alone.
func WriteConfineRules(file string, paths []string) error {
	var b []byte
	for _, p := range paths {
		if !filepath.IsAbs(p) || strings.IndexByte(p, 0) >= 0 {
			return fmt.Errorf("landlock rule %q: not an absolute path", p)
		}
		b = append(append(b, p...), 0)
	}
	return os.WriteFile(file, b, 0o600)
}

// confineLandlock applies the rules file: every path in it writable (and
// what lies beneath), nothing else. The host found Landlock when it wrote
// the file, so a kernel without it now is an error, not a run without
// the protection.
func confineLandlock(file string) error {
	f, err := os.OpenFile(file, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	data, err := fsops.ReadLimited(f, file, maxConfineRules)
	f.Close()
	if err != nil {
		return err
	}
	os.Remove(file)
	var rules []LandlockRule
	for _, p := range strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00") {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("%s: %q is not an absolute clean path", file, p)
		}
		rules = append(rules, LandlockRule{Path: p, Write: true, Optional: true})
	}
	abi, _, err := ApplyLandlock(LandlockPolicy{Rules: rules, WriteOnly: true})
	if err != nil {
		return err
	}
	if abi == 0 {
		_, why := LandlockABI()
		return fmt.Errorf("landlock is unavailable now (%v), and the run host counted on it", why)
	}
	return nil
}

// withoutEnv is env without the variable key.
func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
