package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnixGateFilterDecisions runs the gate's filter over chosen calls:
// every connect goes to the run host, AF_UNIX sockets are stream or
// seqpacket ones (whatever flags ride on the type), and everything else
// is the agent filter's business.
func TestUnixGateFilterDecisions(t *testing.T) {
	arch, err := nativeSeccompArch()
	if err != nil {
		t.Skip(err)
	}
	prog, err := unixGateFilter()
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		notify = unix.SECCOMP_RET_USER_NOTIF
	)
	native := arch.auditArch
	flags := uint64(unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC)
	for _, tt := range []seccompDecision{
		{"connect", unix.SYS_CONNECT, native, [6]uint64{3, 0x1000, 110}, notify},
		{"connect, any fd", unix.SYS_CONNECT, native, [6]uint64{0xdead << 32}, notify},
		{"socket AF_UNIX stream", unix.SYS_SOCKET, native, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}, allow},
		{"socket AF_UNIX seqpacket, flags", unix.SYS_SOCKET, native, [6]uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET | flags}, allow},
		{"socket AF_UNIX dgram", unix.SYS_SOCKET, native, [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, eperm},
		{"socket AF_UNIX dgram, flags", unix.SYS_SOCKET, native, [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM | flags}, eperm},
		{"socket AF_UNIX raw (a datagram socket)", unix.SYS_SOCKET, native, [6]uint64{unix.AF_UNIX, unix.SOCK_RAW}, eperm},
		{"socket AF_UNIX dgram, stream in the high word", unix.SYS_SOCKET, native, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM<<32 | unix.SOCK_DGRAM}, eperm},
		{"socketpair AF_UNIX dgram", unix.SYS_SOCKETPAIR, native, [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, eperm},
		{"socketpair AF_UNIX stream", unix.SYS_SOCKETPAIR, native, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM | flags}, allow},
		{"socket AF_INET dgram", unix.SYS_SOCKET, native, [6]uint64{unix.AF_INET, unix.SOCK_DGRAM}, allow},
		{"sendto", unix.SYS_SENDTO, native, [6]uint64{3, 0, 0, 0, 0x1000, 110}, allow},
		{"getpid", unix.SYS_GETPID, native, [6]uint64{}, allow},
		{"connect of a foreign architecture (the agent filter kills it)", unix.SYS_CONNECT, foreignAuditArch(native), [6]uint64{}, allow},
	} {
		if got := runSeccompBPF(t, prog, tt.nr, tt.arch, tt.args); got != tt.want {
			t.Errorf("%s: action %#x, want %#x", tt.what, got, tt.want)
		}
	}
}

// TestLandlockConnectRight: connecting to a unix socket (ABI 9's
// RESOLVE_UNIX) comes with a rule's Connect alone, never with read.
func TestLandlockConnectRight(t *testing.T) {
	for _, tt := range []struct {
		rule LandlockRule
		dir  bool
		want bool
	}{
		{LandlockRule{Path: "/usr"}, true, false},
		{LandlockRule{Path: "/tmp/ws", Write: true, Exec: true}, true, false},
		{LandlockRule{Path: "/run/ctx/run/x", Connect: true}, true, true},
		{LandlockRule{Path: "/run/ctx/run/x/broker.sock", Connect: true}, false, true},
	} {
		rights := landlockRuleRights(tt.rule, tt.dir, landlockHandledFS(9))
		if got := rights&unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX != 0; got != tt.want {
			t.Errorf("%+v: RESOLVE_UNIX %v, want %v", tt.rule, got, tt.want)
		}
		if rights&unix.LANDLOCK_ACCESS_FS_READ_FILE == 0 {
			t.Errorf("%+v: no read", tt.rule)
		}
		// A kernel before ABI 9 is never handed the right (EINVAL).
		if landlockRuleRights(tt.rule, tt.dir, landlockHandledFS(7))&unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX != 0 {
			t.Errorf("%+v: RESOLVE_UNIX for ABI 7", tt.rule)
		}
	}
}

func TestUnixGateWritable(t *testing.T) {
	dir := t.TempDir()
	g := &unixGate{UnixGateRules: UnixGateRules{Writable: []string{dir + "/ws"}}}
	for _, tt := range []struct {
		path string
		want bool
	}{
		{dir + "/ws", true},
		{dir + "/ws/a/sock", true},
		{dir + "/wsx/sock", false},
		{dir + "/sock", false},
	} {
		if err := mkdirFile(tt.path); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(tt.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.writable(fd); got != tt.want {
			t.Errorf("%s: writable %v, want %v", strings.TrimPrefix(tt.path, dir), got, tt.want)
		}
		unix.Close(fd)
	}
}

// mkdirFile makes path, a file when its name ends in "sock", else a
// directory, with its parents.
func mkdirFile(path string) error {
	if !strings.HasSuffix(path, "sock") {
		return os.MkdirAll(path, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, nil, 0o600)
}
