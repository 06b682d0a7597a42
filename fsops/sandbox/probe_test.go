package sandbox

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"ctx/policy"
)

// TestProbeAheadAnswersAsProbe checks that the probe started ahead gives
// the full probe's answer when asked for it, and the cheap checks' when
// not, in a process where the two differ: root without CAP_SYS_ADMIN,
// whose unshare the kernel refuses (the cheap checks take namespaces to
// work). The process is a child, so the test's own capabilities stay.
func TestProbeAheadAnswersAsProbe(t *testing.T) {
	if os.Getenv("CTX_PROBE_AHEAD_CHILD") != "" {
		probeAheadChild()
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("the probe is started ahead for root only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProbeAheadAnswersAsProbe$")
	cmd.Env = append(os.Environ(), "CTX_PROBE_AHEAD_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if bytes.HasSuffix(out, []byte("\nno-all-threads\n")) {
		t.Skip("syscall.AllThreadsSyscall needs a build without cgo (the race detector's builds use it)")
	}
	var got struct{ Full, Cheap, Direct policy.HostIsolation }
	if err := json.Unmarshal(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:], &got); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	if got.Full.MountNS || got.Full.MountNSWhy == "" {
		t.Fatalf("full answer without CAP_SYS_ADMIN = %+v, want mount namespaces refused with a reason", got.Full)
	}
	if got.Full != got.Direct {
		t.Fatalf("full answer %+v, ProbeIsolation(true) %+v", got.Full, got.Direct)
	}
	if !got.Cheap.MountNS {
		t.Fatalf("cheap answer %+v ran the full probe", got.Cheap)
	}
}

// probeAheadChild drops CAP_SYS_ADMIN from every thread, then prints the
// probe's answers as one JSON line.
func probeAheadChild() {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		panic(err)
	}
	data[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e == syscall.ENOTSUP {
		os.Stdout.WriteString("\nno-all-threads\n") // a cgo build (-race): the parent skips
		os.Exit(0)
	} else if e != 0 {
		panic(e)
	}
	ahead := ProbeAhead()
	answers := struct{ Full, Cheap, Direct policy.HostIsolation }{ahead(true), ahead(false), ProbeIsolation(true)}
	if again := ahead(true); again != answers.Full {
		panic("a second full answer differs")
	}
	b, _ := json.Marshal(answers)
	os.Stdout.Write(append([]byte("\n"), append(b, '\n')...))
	os.Exit(0)
}

// TestProbeAheadEndsBeforeProcesses: the probe started ahead unshares on
// a thread of its own, which then ends, and a thread that ends sends the
// parent-death signal to every process forked on it, maybe by another
// goroutine before the probe's took the thread over. A run host forks its
// sandbox's init (Pdeathsig SIGKILL) after asking the probe, so asking,
// even for the cheap answer, must wait for the probe to have ended: when
// it did not, an init started while the probe was delayed (a loaded
// machine) was killed, and the run ended 137. The probe is delayed here.
func TestProbeAheadEndsBeforeProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the probe is started ahead for root only")
	}
	var ended atomic.Bool
	real := probeAheadRun
	probeAheadRun = func() policy.HostIsolation {
		time.Sleep(50 * time.Millisecond)
		h := real()
		ended.Store(true)
		return h
	}
	defer func() { probeAheadRun = real }()
	ahead := ProbeAhead()
	ahead(false)
	if !ended.Load() {
		t.Fatal("the cheap answer came before the probe started ahead had ended")
	}
}
