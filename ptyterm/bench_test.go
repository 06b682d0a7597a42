package ptyterm

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
//   - ctxterm: ptyterm.Serve with one watcher process reading the socket
//     and the session recorded to an events file;
//   - raw: a bare Go loop reading the PTY master and discarding it, to tell
//     the cost of Go's scheduler from the cost of ctxterm's work.
//
// script and ctxterm are timed the same way: the command starts as
// `stty -echo; <signal ready>; read go; exec cat FILE`, and the clock runs
// from the line "go" written to its terminal, once it is ready (and, for
// ctxterm, once the watcher is joined), to the return of Serve or the exit
// of script. Process start-up is left out of both.
//
// A shared machine makes single runs vary widely, so the
// figures are medians: MB/s of each arm, and "ratio", the median over
// iterations of script's time / ctxterm's time (1.0 = as fast as script;
// ./build.sh bench holds it to 1.0 or more). Run with -benchtime 10x or
// more.
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
	want := st.Size() + (64<<20)/int64(len(line)) // each "\n" arrives as "\r\n"

	var scriptTimes, ctxtermTimes, rawTimes, ratios []time.Duration
	dropped := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var s, c time.Duration
		var whole bool
		if i%2 == 0 {
			s = runScript(b, file)
			c, whole = runServe(b, dir, file, want, true, "")
		} else {
			c, whole = runServe(b, dir, file, want, true, "")
			s = runScript(b, file)
		}
		if !whole {
			// The watcher fell maxClientQueue behind (a loaded machine can
			// stop its process that long) and was dropped, as it should be:
			// the run relayed less than it measures. Run it again.
			if dropped++; dropped > max(3, b.N/2) {
				b.Fatalf("the watcher was dropped %d times", dropped)
			}
			i--
			continue
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
	b.ReportMetric(float64(dropped), "watcher-dropped")
}

// BenchmarkWatchFilter is the cost of the watcher's ControlFilter on the
// relay: Serve streams 64 MiB of text to a watcher that is ctx agent
// watch's client (Connect), once raw and once filtered, in alternating
// order; ratio is the filtered throughput over the raw one, and the
// watcher's CPU time is reported for each (stable on a loaded machine).
func BenchmarkWatchFilter(b *testing.B) {
	if _, err := exec.LookPath("script"); err != nil {
		b.Skip("script(1) not installed")
	}
	for _, c := range []struct{ name, line string }{
		{"ascii", strings.Repeat("0123456789abcdef", 4)[:63] + "\n"},
		{"utf8-sgr", "\x1b[1;32mok\x1b[0m grüße 中文 ✓ \x1b[38;5;208mwarn\x1b[m résumé naïve 0123456789abcdef\n"},
	} {
		b.Run(c.name, func(b *testing.B) { benchWatchFilter(b, c.line) })
	}
}

func benchWatchFilter(b *testing.B, line string) {
	dir := b.TempDir()
	file := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(file, bytes.Repeat([]byte(line), (64<<20)/len(line)), 0o644); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(file)
	want := st.Size() + (64<<20)/int64(len(line))
	var raws, filtereds, ratios, rawCPU, filterCPU []time.Duration
	for i := 0; i < b.N; i++ {
		order := []string{"raw", "filter"}
		if i%2 == 1 {
			order = []string{"filter", "raw"}
		}
		got := map[string]time.Duration{}
		for _, mode := range order {
			d, whole := runServe(b, dir, file, want, true, mode)
			if !whole {
				b.Fatalf("%s watcher was dropped", mode)
			}
			got[mode] = d
			if mode == "raw" {
				rawCPU = append(rawCPU, lastWatcherCPU)
			} else {
				filterCPU = append(filterCPU, lastWatcherCPU)
			}
		}
		raws, filtereds = append(raws, got["raw"]), append(filtereds, got["filter"])
		ratios = append(ratios, got["raw"]*1000/got["filter"])
	}
	mbs := func(ds []time.Duration) float64 { return float64(st.Size()) / median(ds).Seconds() / 1e6 }
	b.ReportMetric(mbs(raws), "raw-MB/s")
	b.ReportMetric(mbs(filtereds), "filtered-MB/s")
	b.ReportMetric(float64(median(ratios))/1000, "ratio")
	b.ReportMetric(median(rawCPU).Seconds()*1000, "raw-watcher-cpu-ms")
	b.ReportMetric(median(filterCPU).Seconds()*1000, "filtered-watcher-cpu-ms")
}

// lastWatcherCPU is the CPU time (user and system) of runServe's last
// watcher process: unlike the wall time, it does not grow with the load
// of a busy machine.
var lastWatcherCPU time.Duration

// runRawRead times cat of file on a PTY read by a bare loop.
func runRawRead(b *testing.B, file string) time.Duration {
	cmd := exec.Command("cat", file)
	start := time.Now()
	master, _, _, err := startOnPTY(cmd, DefaultSize, nil, nil)
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

// runScript times script(1) running cat of file, from the moment its
// shell is ready (it creates a marker file, then waits for a line of
// input) to script's exit.
func runScript(b *testing.B, file string) time.Duration {
	ready := filepath.Join(filepath.Dir(file), "script.ready")
	os.Remove(ready)
	cmd := exec.Command("script", "-q", "-c",
		"stty -echo; : >"+shellQuote(ready)+"; read go; exec cat "+shellQuote(file), "/dev/null")
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	gateR, gateW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer gateW.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = gateR, devnull, devnull
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	gateR.Close()
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	gateW.Write([]byte("go\n"))
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runServe times Serve from the moment the watcher is in place (the
// command waits for a line of console input before it starts cat) to its
// return, and reports whether the watcher received everything: want
// bytes (the terminal turns each "\n" of the file into "\r\n").
func runServe(b *testing.B, dir, file string, want int64, record bool, connect string) (time.Duration, bool) {
	socket := filepath.Join(dir, "run", "main.sock")
	events := ""
	if record {
		events = filepath.Join(dir, "events.jsonl")
		os.Remove(events)
	}
	ready := filepath.Join(dir, "serve.ready")
	os.Remove(ready)
	gateR, gateW := io.Pipe()
	defer gateW.Close()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Serve(Config{
			Cmd:    exec.Command("sh", "-c", `stty -echo; : >"$0"; read go; exec cat "$1"`, ready, file),
			Socket: socket, Events: events, Owner: os.Getuid(),
			Console: ConsolePipe, ConsoleIn: gateR,
			Started: func(int) { close(started) },
		})
		done <- err
	}()
	<-started
	// The watcher is a process of its own, as `ctx agent watch` is (in
	// this one it would take the Go scheduler's processors from Serve):
	// the test binary as a client that counts what it receives.
	watcher := exec.Command(os.Args[0])
	watcher.Env = append(os.Environ(), "PTYTERM_TEST_CLIENT="+socket, "PTYTERM_TEST_SEND=watch\n", "PTYTERM_TEST_DISCARD=1")
	if connect != "" {
		watcher.Env = append(watcher.Env, "PTYTERM_TEST_CONNECT="+connect)
	}
	var count bytes.Buffer
	watcher.Stdout, watcher.Stderr = &count, os.Stderr
	if err := watcher.Start(); err != nil {
		b.Fatal(err)
	}
	defer watcher.Process.Kill()
	// Wait until the watcher is joined (its terminal.watch event or, with
	// no record, a short pause) and the command is ready.
	if record {
		for !bytes.Contains(mustRead(b, events), []byte(EventWatch)) {
			time.Sleep(time.Millisecond)
		}
	} else {
		time.Sleep(50 * time.Millisecond)
	}
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	gateW.Write([]byte("go\n"))
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	if err := watcher.Wait(); err != nil {
		b.Fatal(err)
	}
	lastWatcherCPU = watcher.ProcessState.UserTime() + watcher.ProcessState.SystemTime()
	n, err := strconv.ParseInt(strings.TrimSpace(count.String()), 10, 64)
	if err != nil || n > want {
		b.Fatalf("watcher received %q bytes of %d", count.String(), want)
	}
	return elapsed, n == want
}

func mustRead(b *testing.B, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	return data
}
