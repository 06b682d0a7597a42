package sandbox

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The init joins the run's cgroup itself (cgroup v1), with only the thread
// that starts every process of the run: its locked thread, from which the
// program, every brokered tool and the warm worker are forked (they
// inherit its walls, and so its cgroups). The Go runtime's other threads
// of the init (made before, or later by the runtime's template thread,
// never by a locked thread) stay in the run host's cgroup. Before it
// reports the run's end, once every process of the run has ended, the
// thread moves itself back out: the run's cgroup is then empty while the
// init still exits (the kernel's teardown of the sandbox is not instant),
// and the run host removes the cgroup without waiting for that exit.
//
// A thread moving itself ("0" written to a v1 tasks file) skips the
// kernel's global threadgroup lock, whose first taking waits for an RCU
// grace period (StartInside). The tasks files are opened by the run host
// and handed to the init as descriptors from 5 on: each hierarchy's tasks
// file of the run's cgroup, then of its parent, in the same order; the
// init's argument cgroup-tasks=N gives N, the number of hierarchies.

// cgroupTasksArg is the init's argument naming how many hierarchies'
// tasks files it was given.
const cgroupTasksArg = "cgroup-tasks="

// firstCgroupFD is the first descriptor of the init's tasks files.
const firstCgroupFD = planFD + 1

// SetCgroupTasks gives the init the tasks files ThreadTasksFiles opened,
// for its locked thread to join the run's cgroup at its start and leave
// it before it reports the end. Call before the start; the caller closes
// its copies once the init has started.
func (s *Sandbox) SetCgroupTasks(files []*os.File) {
	s.Cmd.ExtraFiles = append(s.Cmd.ExtraFiles, files...)
	s.Cmd.Args = append(s.Cmd.Args, cgroupTasksArg+strconv.Itoa(len(files)/2))
}

// cgroupParents are the init's descriptors of the parent cgroups' tasks
// files, for leaveRunCgroup.
var cgroupParents []int

// joinRunCgroup moves the calling (locked) thread into the run's cgroup
// when the init was given tasks files (args), and keeps the parents'.
func joinRunCgroup(args []string) error {
	n := 0
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, cgroupTasksArg); ok {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 8 {
				return errors.New("a bad " + a)
			}
		}
	}
	for i := 0; i < n; i++ {
		fd := firstCgroupFD + i
		_, err := unix.Write(fd, []byte("0"))
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		cgroupParents = append(cgroupParents, firstCgroupFD+n+i)
	}
	return nil
}

// leaveRunCgroup moves the calling (locked) thread back to the parent
// cgroups, once every process of the run has ended. A failure leaves it
// inside until the init's exit: the run host's removal of the cgroup
// (KillAll, then Remove, which retries while the cgroup is busy) then
// lasts until that exit, as it did before the thread left at all.
func leaveRunCgroup() {
	for _, fd := range cgroupParents {
		unix.Write(fd, []byte("0"))
		unix.Close(fd)
	}
	cgroupParents = nil
}
