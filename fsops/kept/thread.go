package kept

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"ctx/fsops"
)

// onThreadIn runs fn on a locked thread of its own whose mount namespace
// enter changes (a setns into a kept template, or a new namespace), then
// brings the thread back to this process's mount namespace, root and
// working directory before it is given back to the runtime. The thread
// keeps a filesystem context of its own (unshared to change namespace),
// equal to the process's: the run host never changes its working
// directory. A thread that cannot be brought back is never given back:
// its goroutine parks for the rest of the process, the thread with it,
// running nothing else. It is not ended either: a process forked on it
// earlier (the early init, forked on whichever thread) would get its
// parent-death signal.
func onThreadIn(enter, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err, back := onThread(enter, fn)
		done <- err
		if !back {
			select {}
		}
		runtime.UnlockOSThread()
	}()
	return <-done
}

func onThread(enter, fn func() error) (err error, back bool) {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err, true
	}
	defer unix.Close(root)
	cwd, err := unix.Open(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err, true
	}
	defer unix.Close(cwd)
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return err, true
	}
	defer unix.Close(self)
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return err, true
	}
	if err = enter(); err == nil {
		err = fn()
	}
	return err, comeBack(self, root, cwd) == nil
}

// comeBack takes the calling thread back to the mount namespace of this
// process (self, its pidfd), and to root and cwd: joining a mount
// namespace moves a thread to its root.
func comeBack(self, root, cwd int) error {
	if err := unix.Setns(self, unix.CLONE_NEWNS); err != nil {
		return err
	}
	var want, got unix.Stat_t
	if err := unix.Fstat(root, &want); err != nil {
		return err
	}
	if err := unix.Stat("/", &got); err != nil {
		return err
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		if err := unix.Chroot(fsops.FDPath(root)); err != nil {
			return err
		}
	}
	return unix.Fchdir(cwd)
}
