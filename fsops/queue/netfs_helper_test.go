package queue

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The network filesystem tests run the queue as it is used across hosts:
// one directory exported by a real sshd on a loopback port, mounted twice
// with sshfs (FUSE over SFTP, which has no RENAME_NOREPLACE), and workers
// in their own UTS namespaces with their own host names, so that each
// mount is a host: leases from the other mount are foreign, and each host
// writes its own event log. Everything is started and stopped by the test,
// bounded in time, and on 127.0.0.1 only.

// netFS is an export and its mounts.
type netFS struct {
	dir    string   // scratch directory
	export string   // the exported directory
	mounts []string // mount points, in the order mount made them
	port   int
	key    string // the client's private key
}

// needNetFS skips (or, with CTX_REQUIRE_SANDBOX=1, fails) when sshd, sshfs
// or FUSE are not available, or we are not root.
func needNetFS(t testing.TB) {
	t.Helper()
	var missing []string
	for _, p := range []string{"/usr/sbin/sshd", "/usr/bin/ssh-keygen", "/dev/fuse"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if _, err := exec.LookPath("sshfs"); err != nil {
		missing = append(missing, "sshfs")
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("network filesystem test needs %s (apt-get install sshfs openssh-server; .ci/run does)", strings.Join(missing, ", "))
	if os.Getenv("CTX_REQUIRE_SANDBOX") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// startNetFS starts an sshd on a free loopback port with a throwaway host
// key and one authorized key, all in a scratch directory, stopped when
// the test ends.
func startNetFS(t testing.TB) *netFS {
	t.Helper()
	needNetFS(t)
	n := &netFS{dir: t.TempDir()}
	n.export = filepath.Join(n.dir, "export")
	n.key = filepath.Join(n.dir, "client")
	if err := os.Mkdir(n.export, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{filepath.Join(n.dir, "hostkey"), n.key} {
		if out, err := exec.Command("/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(n.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/hostkey
AuthorizedKeysFile %s/authorized_keys
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
`, n.port, n.dir, n.dir)
	cfg := filepath.Join(n.dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	var logb bytes.Buffer
	sshd.Stderr = &logb
	// A test binary killed before its cleanups (a closed pipe, a timeout)
	// must not leave a server or a mount behind.
	sshd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := sshd.Start(); err != nil {
		t.Fatalf("sshd: %v", err)
	}
	t.Cleanup(func() {
		sshd.Process.Kill()
		sshd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen: %s", logb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// safeOpts are the sshfs options ctx asks for (no caches), and the ssh
// options of this throwaway server.
func (n *netFS) sshOpts() string {
	return fmt.Sprintf("port=%d,IdentityFile=%s,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes,LogLevel=ERROR",
		n.port, n.key)
}

const safeSSHFS = "dir_cache=no,entry_timeout=0,attr_timeout=0,negative_timeout=0"

// mount mounts the export at a new mount point with sshfs and extra
// options, in the foreground as our child, unmounted when the test ends.
func (n *netFS) mount(t testing.TB, extra string) string {
	t.Helper()
	mnt := filepath.Join(n.dir, fmt.Sprintf("mnt%d", len(n.mounts)))
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := n.sshOpts()
	if extra != "" {
		opts += "," + extra
	}
	cmd := exec.Command("sshfs", "-f", "-o", opts, "root@127.0.0.1:"+n.export, mnt)
	var logb bytes.Buffer
	cmd.Stderr = &logb
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // sshfs -f unmounts on SIGTERM
	if err := cmd.Start(); err != nil {
		t.Fatalf("sshfs: %v", err)
	}
	t.Cleanup(func() {
		unix.Unmount(mnt, unix.MNT_DETACH)
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		var sfs unix.Statfs_t
		if unix.Statfs(mnt, &sfs) == nil && sfs.Type == unix.FUSE_SUPER_MAGIC {
			break
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("sshfs did not mount %s: %s", mnt, logb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.mounts = append(n.mounts, mnt)
	return mnt
}

// twoHosts starts an export, mounts it twice with ctx's options, and
// makes a ctx root with space "proj" on it. It returns the root as each
// mount ("host") sees it.
func twoHosts(t *testing.T) (a, b string) {
	t.Helper()
	n := startNetFS(t)
	ma, mb := n.mount(t, safeSSHFS), n.mount(t, safeSSHFS)
	a, b = filepath.Join(ma, "ctx"), filepath.Join(mb, "ctx")
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateSpace(a, "proj"); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// hostChild is child() on another "host": its own UTS namespace, with
// QUEUE_TEST_HOST as its host name (TestMain sets it).
func hostChild(t *testing.T, root, host, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := child(t, root, "proj", role, append(env, "QUEUE_TEST_HOST="+host)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// setTestHost is TestMain's part of hostChild.
func setTestHost() {
	if h := os.Getenv("QUEUE_TEST_HOST"); h != "" {
		if err := unix.Sethostname([]byte(h)); err != nil {
			fmt.Fprintln(os.Stderr, "child: sethostname:", err)
			os.Exit(2)
		}
	}
}

// netChild runs the network roles of a child on a "host":
//
//	hold     claim one job with QUEUE_TEST_HEARTBEAT, print "J TOKEN";
//	         renew it unless QUEUE_TEST_RENEW=no; on a line on stdin,
//	         try to finish it by worker name and token from a fresh
//	         Queue, and print "finished" or the error
//	race     publish the names on stdin, printing "P J" or "C J" (conflict)
//	ingest   one Ingest pass per line on stdin, printing "I J" for each
//	         job it reports, then "-"
func netChild(q *Queue, role string) int {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	switch role {
	case "hold":
		hb, _ := time.ParseDuration(os.Getenv("QUEUE_TEST_HEARTBEAT"))
		job, l, err := q.Claim(Owner{Worker: "w", Heartbeat: hb})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		if os.Getenv("QUEUE_TEST_RENEW") != "no" {
			q.Heartbeat(job, l.Token, hb, make(chan struct{}), nil)
		}
		fmt.Println(job, l.Token)
		bufio.NewReader(os.Stdin).ReadString('\n')
		// As `ctx queue finish --worker w --token T` would: a Queue that
		// holds no claim, so only the lease on disk can tell.
		q2, err := Open(os.Getenv("QUEUE_TEST_ROOT"), os.Getenv("QUEUE_TEST_SPACE"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		defer q2.Close()
		if _, err := q2.Finish(job, Done, resultBytes(job), FinishOptions{Worker: "w", Token: l.Token}); err != nil {
			fmt.Println(err)
			return 0
		}
		fmt.Println("finished")
		return 0
	case "race":
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			j := sc.Text()
			_, err := q.Publish(j, []byte(`"published"`))
			switch {
			case err == nil:
				fmt.Fprintln(out, "P", j)
			case errors.Is(err, ErrConflict):
				fmt.Fprintln(out, "C", j)
			default:
				fmt.Fprintln(os.Stderr, "child:", err)
				return 2
			}
			out.Flush()
		}
		return 0
	case "ingest":
		return netIngest(q, out)
	}
	fmt.Fprintln(os.Stderr, "child: unknown role", role)
	return 2
}

// netIngest is the ingest role: for each line on stdin, one Ingest pass,
// printing "I J" for each job it reports and "-" after the pass.
func netIngest(q *Queue, out *bufio.Writer) int {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		pub, _, err := q.Ingest()
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		for _, j := range pub {
			fmt.Fprintln(out, "I", j)
		}
		fmt.Fprintln(out, "-")
		out.Flush()
	}
	return 0
}
