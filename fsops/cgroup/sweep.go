package cgroup

import (
	"path/filepath"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// RemoveRuns removes the cgroups of the named runs (run ids), where
// a run of this caller would have made them: CGROUP2/ctx/RUN, or RUN
// beside this process's own v1 cgroups. A run whose host was killed
// leaves its cgroup, empty once its processes are gone (they die with
// its init). Only empty cgroups go (rmdir); a name that is not a run id
// is never looked up.
func RemoveRuns(runs []string) {
	var dirs []string
	if mount := cgroup2Mount(); mount != "" {
		dirs = append(dirs, filepath.Join(mount, "ctx"))
	}
	own := ownCgroups1()
	for ctl, mount := range cgroup1Mounts() {
		if ctl == "pids" || ctl == "memory" || ctl == "cpuacct" {
			dirs = append(dirs, filepath.Join(mount, own[ctl]))
		}
	}
	for _, run := range runs {
		if !fsops.IsRunID(run) {
			continue
		}
		for _, d := range dirs {
			unix.Rmdir(filepath.Join(d, run))
		}
	}
}
