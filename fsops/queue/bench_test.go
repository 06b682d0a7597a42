package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The benchmarks compare the queue with a baseline in the same run: a
// minimal loop that performs only what the protocol requires for one job —
// the same creates, writes, renames, mkdirs, removals and fsyncs, on the
// same directories — with no validation, listing, lease content, checks or
// events. ratio = queue jobs/s ÷ baseline jobs/s; fsyncs/job is counted by
// the package's own instrumentation for both.
//
//	go test -run '^$' -bench . ./fsops/queue/
//
// "tmpfs" runs where fsync costs nothing (what remains is the protocol's
// system calls); "disk" runs in the test temp dir, where fsync dominates.
// Both sides run interleaved in batches of 16 jobs; median-ratio is the
// median of the per-batch ratios, robust to load bursts on a shared host.

// baselineDirs are the queue's directory descriptors for the baseline loop.
type baselineDirs struct{ pending, lease, claimed, done int }

func baselineJob(d baselineDirs, job string, req []byte) error {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	sync := func(fd int) { syncCount.Add(1); must(unix.Fsync(fd)) }
	writeFile := func(dir int, tmp string, data []byte) {
		fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o640)
		must(err)
		_, err = unix.Write(fd, data)
		must(err)
		sync(fd)
		must(unix.Close(fd))
	}
	rename := func(od int, on string, nd int, nn string) {
		must(unix.Renameat2(od, on, nd, nn, unix.RENAME_NOREPLACE))
	}
	// publish
	writeFile(d.pending, ".t", req)
	rename(d.pending, ".t", d.pending, job)
	sync(d.pending)
	// claim
	must(unix.Mkdirat(d.claimed, job, 0o770))
	cj, err := unix.Openat(d.claimed, job, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(err)
	rename(d.pending, job, cj, job)
	sync(cj)
	sync(d.pending)
	sync(d.claimed)
	// lease
	must(unix.Mkdirat(d.lease, job, 0o770))
	lj, err := unix.Openat(d.lease, job, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(err)
	writeFile(lj, ".t", []byte(`{"worker":"w"}`))
	rename(lj, ".t", lj, "worker")
	sync(lj)
	sync(d.lease)
	// finish
	writeFile(d.done, ".t", []byte("ok\n"))
	rename(d.done, ".t", d.done, job+".result")
	sync(d.done)
	rename(cj, job, d.done, job)
	sync(cj)
	sync(d.done)
	must(unix.Unlinkat(lj, "worker", 0))
	sync(lj)
	must(unix.Unlinkat(d.lease, job, unix.AT_REMOVEDIR))
	sync(d.lease)
	must(unix.Unlinkat(d.claimed, job, unix.AT_REMOVEDIR))
	sync(d.claimed)
	unix.Close(cj)
	unix.Close(lj)
	return nil
}

// queueJob runs one job through the queue as `ctx queue publish` (with a
// generated name, its default) and a worker loop would.
func queueJob(q *Queue, req []byte) error {
	job, err := q.Publish("", req)
	if err != nil {
		return err
	}
	got, _, err := q.Claim(Owner{Worker: "w"})
	if err != nil {
		return err
	}
	if got != job {
		return fmt.Errorf("claimed %s, want %s", got, job)
	}
	_, err = q.Finish(job, Done, []byte("ok\n"), FinishOptions{})
	return err
}

func benchDir(b *testing.B, where string) string {
	if where == "tmpfs" {
		if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
			b.Skip("no /dev/shm")
		}
	}
	if where == "tmpfs" {
		return fastDir(b)
	}
	return b.TempDir()
}

// BenchmarkJobCycle: publish + claim + finish of one job, fully durable,
// against the baseline loop, interleaved in batches so both see the same
// machine state.
func BenchmarkJobCycle(b *testing.B) {
	for _, where := range []string{"tmpfs", "disk"} {
		b.Run(where, func(b *testing.B) {
			base := benchDir(b, where)
			_, q := newQueue(b, filepath.Join(base))
			bq, err := os.MkdirTemp(base, "baseline-")
			if err != nil {
				b.Fatal(err)
			}
			var d baselineDirs
			for _, p := range []struct {
				fd   *int
				name string
			}{{&d.pending, "pending"}, {&d.lease, "lease"}, {&d.claimed, "claimed"}, {&d.done, "done"}} {
				os.Mkdir(filepath.Join(bq, p.name), 0o770)
				if *p.fd, err = unix.Open(filepath.Join(bq, p.name), unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
					b.Fatal(err)
				}
			}
			req := requestBytes("x")
			var tQueue, tBase time.Duration
			var sQueue, sBase int64
			var ratios []float64
			const batch = 16
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				s0, t0 := Syncs(), time.Now()
				for k := i; k < i+n; k++ {
					if err := queueJob(q, req); err != nil {
						b.Fatal(err)
					}
				}
				s1, t1 := Syncs(), time.Now()
				for k := i; k < i+n; k++ {
					// a name as long as a generated one (44 bytes)
					baselineJob(d, fmt.Sprintf("j%034d.req.json", k), req)
				}
				s2, t2 := Syncs(), time.Now()
				tQueue += t1.Sub(t0)
				tBase += t2.Sub(t1)
				ratios = append(ratios, t2.Sub(t1).Seconds()/t1.Sub(t0).Seconds())
				sQueue += s1 - s0
				sBase += s2 - s1
			}
			b.StopTimer()
			jobs := float64(b.N)
			b.ReportMetric(jobs/tQueue.Seconds(), "jobs/s")
			b.ReportMetric(jobs/tBase.Seconds(), "baseline-jobs/s")
			b.ReportMetric(tBase.Seconds()/tQueue.Seconds(), "ratio")
			// On a shared machine a burst of load hits one side of a batch;
			// the median of the per-batch ratios is not moved by it.
			sort.Float64s(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
			b.ReportMetric(float64(sQueue)/jobs, "fsyncs/job")
			b.ReportMetric(float64(sBase)/jobs, "baseline-fsyncs/job")
		})
	}
}

// BenchmarkWorkers: claim + finish throughput of 1, 2, 4 and 8 workers
// (each its own Queue, as separate processes would be) draining b.N jobs
// published beforehand.
func BenchmarkWorkers(b *testing.B) {
	for _, workers := range []int{1, 2, 4, 8} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			root, q := newQueue(b, benchDir(b, "tmpfs"))
			req := requestBytes("x")
			for i := 0; i < b.N; i++ {
				if _, err := q.Publish(fmt.Sprintf("j%09d.req.json", i), req); err != nil {
					b.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			s0 := Syncs()
			b.ResetTimer()
			t0 := time.Now()
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					wq, err := Open(root, "proj")
					if err != nil {
						errs <- err
						return
					}
					defer wq.Close()
					for {
						job, _, err := wq.Claim(Owner{Worker: "w" + strconv.Itoa(w)})
						if errors.Is(err, ErrEmpty) {
							return
						}
						if err == nil {
							_, err = wq.Finish(job, Done, []byte("ok\n"), FinishOptions{})
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(t0)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
			b.ReportMetric(float64(Syncs()-s0)/float64(b.N), "fsyncs/job")
		})
	}
}

// BenchmarkJobCycleSSHFS: the job cycle of BenchmarkJobCycle on a queue
// exported by a loopback sshd and mounted with sshfs as ctx asks (no
// caches): what one worker gets from a FUSE network filesystem, where
// every step is a round trip. There is no baseline: the baseline loop's
// RENAME_NOREPLACE does not exist there.
func BenchmarkJobCycleSSHFS(b *testing.B) {
	n := startNetFS(b)
	root := filepath.Join(n.mount(b, safeSSHFS), "ctx")
	if err := os.Mkdir(root, 0o755); err != nil {
		b.Fatal(err)
	}
	if _, _, err := CreateSpace(root, "proj"); err != nil {
		b.Fatal(err)
	}
	q, err := Open(root, "proj")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	req := requestBytes("x")
	s0 := Syncs()
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		if err := queueJob(q, req); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(Syncs()-s0)/float64(b.N), "fsyncs/job")
}

// Syncs returns the number of fsync calls the package has made in this
// process. Benchmarks divide it by the number of jobs.
func Syncs() int64 { return syncCount.Load() }
