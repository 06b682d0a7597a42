package ptyterm

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkPTYThroughput pushes `cat` of a 64 MiB text file through a PTY
// three ways, back to back in each iteration (in turn first, to cancel
// order effects):
//
//   - script: util-linux script(1), `script -q -c 'cat FILE' /dev/null`
//     with its output to /dev/null, the baseline;
//   - ctxterm: ptyterm.Serve with one watcher reading the socket and the
//     session recorded to an events file;
//   - raw: a bare Go loop reading the PTY master and discarding it, to tell
//     the cost of Go's scheduler from the cost of ctxterm's work.
//
// A shared machine makes single runs vary by a factor of two, so the
// figures are medians: MB/s of each arm, and "ratio", the median over
// iterations of script's time / ctxterm's time (1.0 = as fast as script).
// Run with -benchtime 10x or more.
func BenchmarkPTYThroughput(b *testing.B) {
	if _, err := exec.LookPath("script"); err != nil {
		b.Skip("script(1) not installed")
	}
	dir := b.TempDir()
	file := filepath.Join(dir, "data.txt")
	line := strings.Repeat("0123456789abcdef", 4)[:63] + "\n"
	if err := os.WriteFile(file, bytes.Repeat([]byte(line), (64<<20)/len(line)), 0o644); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(file)
	size := float64(st.Size())

	var scriptTimes, ctxtermTimes, rawTimes, ratios []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var s, c time.Duration
		if i%2 == 0 {
			s, c = runScript(b, file), runServe(b, dir, file, true)
		} else {
			c, s = runServe(b, dir, file, true), runScript(b, file)
		}
		scriptTimes, ctxtermTimes = append(scriptTimes, s), append(ctxtermTimes, c)
		ratios = append(ratios, s*1000/c) // per mille, as a Duration to share median
		rawTimes = append(rawTimes, runRawRead(b, file))
	}
	b.StopTimer()
	mbs := func(ds []time.Duration) float64 { return size / median(ds).Seconds() / 1e6 }
	b.ReportMetric(mbs(scriptTimes), "script-MB/s")
	b.ReportMetric(mbs(ctxtermTimes), "ctxterm-MB/s")
	b.ReportMetric(mbs(rawTimes), "raw-MB/s")
	b.ReportMetric(float64(median(ratios))/1000, "ratio")
}

// runRawRead times cat of file on a PTY read by a bare loop.
func runRawRead(b *testing.B, file string) time.Duration {
	cmd := exec.Command("cat", file)
	start := time.Now()
	master, _, _, err := startOnPTY(cmd, DefaultSize, nil)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := master.Read(buf); err != nil {
			break
		}
	}
	cmd.Wait()
	master.Close()
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func runScript(b *testing.B, file string) time.Duration {
	cmd := exec.Command("script", "-q", "-c", "cat "+file, "/dev/null")
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// runServe times Serve from the moment the watcher is in place (the
// command waits for a line of console input before it starts cat) to its
// return, and checks that the watcher received everything.
func runServe(b *testing.B, dir, file string, record bool) time.Duration {
	socket := filepath.Join(dir, "run", "main.sock")
	events := ""
	if record {
		events = filepath.Join(dir, "events.jsonl")
		os.Remove(events)
	}
	gateR, gateW := io.Pipe()
	defer gateW.Close()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Serve(Config{
			Cmd:    exec.Command("sh", "-c", `stty -echo; read go; exec cat "$0"`, file),
			Socket: socket, Events: events, Owner: os.Getuid(),
			Console: ConsolePipe, ConsoleIn: gateR,
			Started: func(int) { close(started) },
		})
		done <- err
	}()
	<-started
	conn, err := net.Dial("unix", socket)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("watch\n"))
	received := make(chan int64, 1)
	go func() {
		// Like a watcher process: big reads, bytes thrown away.
		buf := make([]byte, 64<<10)
		var total int64
		for {
			n, err := conn.Read(buf)
			total += int64(n)
			if err != nil {
				received <- total
				return
			}
		}
	}()
	// Wait until the watcher is joined: its terminal.watch event (or, with
	// no record, a short pause).
	if record {
		for !bytes.Contains(mustRead(b, events), []byte(EventWatch)) {
			time.Sleep(time.Millisecond)
		}
	} else {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	gateW.Write([]byte("go\n"))
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	st, _ := os.Stat(file)
	if n := <-received; n < st.Size() {
		b.Fatalf("watcher received %d bytes of %d", n, st.Size())
	}
	return elapsed
}

func mustRead(b *testing.B, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	return data
}
