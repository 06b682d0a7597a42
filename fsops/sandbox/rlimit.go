package sandbox

import (
	"fmt"
	"math"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// rlimitResources maps the plan's limit names to the kernel's resources.
var rlimitResources = map[string]int{
	"cpu":    unix.RLIMIT_CPU,
	"data":   unix.RLIMIT_DATA,
	"fsize":  unix.RLIMIT_FSIZE,
	"nofile": unix.RLIMIT_NOFILE,
	"nproc":  unix.RLIMIT_NPROC,
	"core":   unix.RLIMIT_CORE,
}

// cpuGrace is how far RLIMIT_CPU's hard limit lies past its soft one:
// SIGXCPU at the soft limit lets a process end cleanly, SIGKILL follows.
const cpuGrace = 5

// applyLimits sets the plan's resource limits on the init, which every
// process of the run inherits. A limit cannot be raised past the hard
// limit ctx itself was started with unless ctx is privileged: it is then
// the lower of the two. SIGXFSZ is ignored, so a write past file_bytes
// fails with EFBIG instead of killing the writer: the write is refused,
// the process goes on.
func applyLimits(limits map[string]uint64) error {
	for name, v := range limits {
		res, ok := rlimitResources[name]
		if !ok {
			return fmt.Errorf("unknown limit %q", name)
		}
		want := unix.Rlimit{Cur: v, Max: v}
		if v == math.MaxUint64 {
			want = unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
		} else if name == "cpu" {
			want.Max = v + cpuGrace
		}
		if err := unix.Setrlimit(res, &want); err != nil {
			var have unix.Rlimit
			if unix.Getrlimit(res, &have) != nil {
				return fmt.Errorf("limit %s: %w", name, err)
			}
			want.Max = min(want.Max, have.Max)
			want.Cur = min(want.Cur, want.Max)
			if err := unix.Setrlimit(res, &want); err != nil {
				return fmt.Errorf("limit %s: %w", name, err)
			}
		}
	}
	if _, ok := limits["fsize"]; ok {
		signal.Ignore(syscall.SIGXFSZ)
	}
	return nil
}
