package cgroup

import (
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// ThreadTasksFiles opens, for the init to move its thread in and out
// (SetCgroupTasks), each hierarchy's tasks file of the run's cgroup, then
// of its parent, write-only. It returns nil on cgroup v2, where a thread
// cannot be in another cgroup than its process's.
func (c *Run) ThreadTasksFiles() ([]*os.File, error) {
	if c.Version != 1 {
		return nil, nil
	}
	ctls := make([]string, 0, len(c.dirs))
	for ctl := range c.dirs {
		ctls = append(ctls, ctl)
	}
	slices.Sort(ctls)
	var files []*os.File
	for _, parent := range []bool{false, true} {
		for _, ctl := range ctls {
			dir := c.dirs[ctl]
			if parent {
				dir = filepath.Dir(dir)
			}
			f, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY|unix.O_NOFOLLOW, 0)
			if err != nil {
				closeFiles(files)
				return nil, err
			}
			files = append(files, f)
		}
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
