package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Writable says which hierarchy New could make a run's
// cgroup in, by the same rules, without making one: v2 needs the memory
// and pids controllers and write access to the unified root's subtree
// control (and to ctx/ under it when present); v1 needs the pids and memory
// hierarchies with this process's own cgroup writable in both.
func Writable() (int, string) {
	why2 := cgroup2Writable()
	if why2 == "" {
		return 2, ""
	}
	why1 := cgroup1Writable()
	if why1 == "" {
		return 1, ""
	}
	return 0, "cgroup2: " + why2 + "; cgroup1: " + why1
}

func cgroup2Writable() string {
	mount := cgroup2Mount()
	if mount == "" {
		if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
			return "/proc is not mounted, so no hierarchy can be found"
		}
		return "no cgroup2 hierarchy mounted"
	}
	controllers, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		return err.Error()
	}
	have := strings.Fields(string(controllers))
	for _, want := range []string{"memory", "pids"} {
		if !slices.Contains(have, want) {
			return "the unified hierarchy has no " + want + " controller"
		}
	}
	for _, p := range []string{mount, filepath.Join(mount, "cgroup.subtree_control"), filepath.Join(mount, "ctx")} {
		err := unix.Access(p, unix.W_OK)
		if errors.Is(err, unix.ENOENT) && p == filepath.Join(mount, "ctx") {
			continue
		}
		if err != nil {
			return p + " is not writable by uid " + fmt.Sprint(os.Getuid()) + ": " + err.Error()
		}
	}
	return ""
}

func cgroup1Writable() string {
	mounts := cgroup1Mounts()
	own := ownCgroups1()
	for _, ctl := range []string{"pids", "memory"} {
		mount, ok := mounts[ctl]
		if !ok {
			return "no v1 " + ctl + " hierarchy"
		}
		dir := filepath.Join(mount, own[ctl])
		if err := unix.Access(dir, unix.W_OK); err != nil {
			return dir + " is not writable by uid " + fmt.Sprint(os.Getuid()) + ": " + err.Error()
		}
	}
	return ""
}
