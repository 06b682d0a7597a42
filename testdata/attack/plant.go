package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// plantWorker tries to reach into the run's tool workers between and
// during their calls (a worker that stays for another call must never be
// open to the agent: what is planted in one call would run the next):
// until the file STOP exists, it finds every tool worker of the run and
// opens its memory for writing. It prints found=yes|no, the number of
// workers it saw, and mem=ok once any open succeeded, else the errno.
func plantWorker(stop string) {
	seen := map[int]bool{}
	var refused error
	opened := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		if _, err := os.Stat(stop); err == nil {
			break
		}
		for _, pid := range toolWorkers() {
			seen[pid] = true
			f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/mem", os.O_RDWR, 0)
			if err == nil {
				opened = true
				f.Close()
			} else {
				refused = err
			}
		}
	}
	fmt.Printf("found=%s\n", map[bool]string{true: "yes", false: "no"}[len(seen) > 0])
	fmt.Printf("workers=%d\n", len(seen))
	if opened {
		fmt.Println("mem=ok")
	} else {
		report("mem", refused)
	}
}

// toolWorkers are the run's tool worker processes (their command line is
// the worker applet's, whatever call they run).
func toolWorkers() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.HasPrefix(string(cmd), "ctx-tool-worker\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}
