package toolrun

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ctx/applets/cli"
	"ctx/fsops"
	"ctx/fsops/broker"
	"ctx/policy"
)

// BrokeredCall is how a tool applet started inside a sandbox runs: it asks
// the run host (broker.Socket, found by path) to run the call, passing
// its standard descriptors, and exits with the status the host answers. The
// host decides, has the sandbox's init execute the tool, and records the
// call. It reports false when there is nothing to ask: outside a sandbox,
// in a run without a broker, or for a direct execution (BrokeredEnv set by
// hand).
func BrokeredCall(e *cli.Env, tool string, args []string) (int, bool) {
	if e.Getenv(broker.BrokeredEnv) != "" {
		return 0, false
	}
	conn, req, fds, relay, code, ok := startCall(e, tool, args)
	if conn < 0 {
		return code, ok
	}
	defer fsops.CloseFD(conn)
	return callBroker(e, conn, req, fds, relay, "the run host", e.Exits), true
}

// startCall connects to the run's broker and makes the request of a call
// of tool with the caller's streams (fds, relayed through relay), its
// directory and its environment. conn is -1 when there is nothing to ask
// (code and ok as dialRunBroker's) or the streams could not be passed
// (code printed, ok true); otherwise the caller closes conn.
func startCall(e *cli.Env, tool string, args []string) (conn int, req broker.Request, fds []int, relay *descriptorRelay, code int, ok bool) {
	conn, code, ok = dialRunBroker(e)
	if conn < 0 {
		return conn, req, nil, nil, code, ok
	}
	fds, relay, err := StandardDescriptors(e)
	if err != nil {
		fsops.CloseFD(conn)
		return -1, req, nil, nil, cli.Fail(e, cli.Internal, "%v", err), true
	}
	cwd, _ := os.Getwd()
	req = broker.Request{Tool: tool, Args: args, Env: e.Environ(), Cwd: cwd}
	return conn, req, fds, relay, 0, true
}

// dialRunBroker connects to the run's broker: /mnt/proc/broker.sock inside
// a sandbox, CTX_BROKER in iso landlock. Without one (outside a run, a run
// whose broker could not be bound) conn is -1 and ok false; when it cannot
// be reached conn is -1, ok true and code the failure, already printed.
func dialRunBroker(e *cli.Env) (conn, code int, ok bool) {
	socket := broker.Socket
	if _, err := os.Stat(policy.IdentityPath); err != nil {
		// No sandbox identity: an iso landlock run names its broker (a
		// host path) instead; anything else has none.
		if socket = e.Getenv("CTX_BROKER"); socket == "" {
			return -1, 0, false
		}
	}
	conn, err := broker.Dial(socket)
	if err != nil {
		if os.IsNotExist(err) || err == unix.ENOENT {
			return -1, 0, false // a run without a broker
		}
		return -1, cli.Fail(e, cli.Unavailable, "the run host cannot be reached at %s: %v", socket, err), true
	}
	return conn, 0, true
}

// AskDecision has the run host decide and record a call of tool that this
// process runs itself (terminal, a terminal tool on the caller's terminal)
// or has refused itself (tsh, ctxmcp serve): broker.Decide. It
// returns the host's answer, already printed when it refuses; ok is false
// when there is no broker to ask.
func AskDecision(e *cli.Env, tool string, terminal bool) (code int, ok bool) {
	conn, code, ok := dialRunBroker(e)
	if conn < 0 {
		return code, ok
	}
	defer fsops.CloseFD(conn)
	req := broker.Request{Tool: tool, Decide: &broker.Decide{Terminal: terminal}}
	return CallBroker(e, conn, req, nil, &descriptorRelay{}, "the run host"), true
}

// cancelAnswerWait bounds how long a cancelled caller waits for the host's
// answer: the host answers within its own bound (cancelWait, 5 s, after
// which it reports the tool killed), so only a host that is itself stuck
// is given up on.
const cancelAnswerWait = 6 * time.Second

// CallBroker sends req with the tool's descriptors fds on conn and waits
// for the host's answer, printing a refusal or an error as one line, and
// returns the call's exit status. SIGINT, SIGTERM or SIGHUP meanwhile
// ends our side of the connection, which cancels the call on the host:
// the tool's whole process tree ends. host names the run host in errors.
func CallBroker(e *cli.Env, conn int, req broker.Request, fds []int, relay *descriptorRelay, host string) int {
	return callBroker(e, conn, req, fds, relay, host, false)
}

// signalGrace is how long a caller that is a process of its own (a tool
// run by path, ctx run) waits for its call's answer before it catches
// SIGINT, SIGTERM and SIGHUP. Catching them (os/signal) starts a thread
// locked to the signal mask and a loop that waits on every signal, and
// hands each signal's mask over to that thread and back: more CPU than
// the rest of a fast call's caller besides Go's start. A signal before
// then ends the process as it would any program, and the host, seeing
// its connection end, cancels the call as it does for a caller killed
// outright; only the wait for the tool's last output is skipped. A
// variable for tests.
var signalGrace = 20 * time.Millisecond

// callBroker is CallBroker; late says the process ends with the call
// (cli.Env.Exits), which then catches signals only after signalGrace.
func callBroker(e *cli.Env, conn int, req broker.Request, fds []int, relay *descriptorRelay, host string, late bool) int {
	cancel, abandon, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer close(done)
	status := make(chan int, 1)
	sigs := make(chan os.Signal, 2)
	watch := func() {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		go func() {
			select {
			case sig := <-sigs:
				status <- cli.Signaled(sig.(syscall.Signal))
				close(cancel)
			case <-done:
				return
			}
			// A second signal ends the wait for the host's answer.
			select {
			case <-sigs:
				close(abandon)
			case <-done:
			}
		}()
	}
	slow := watch // called once the call has gone signalGrace unanswered
	if !late {
		watch()
		defer signal.Stop(sigs)
		slow = nil
	}
	code, cancelled := awaitBroker(e, conn, req, fds, relay, host, cancel, abandon, slow)
	if cancelled {
		return <-status
	}
	return code
}

// BrokeredCallContext is BrokeredCall for a process that runs calls on
// behalf of others (ctxmcp serve in a sandbox): the end of ctx, not a
// signal, cancels the call, and the status is then cli.Failure. Its
// streams are e's, relayed through pipes when they are not files.
func BrokeredCallContext(ctx context.Context, e *cli.Env, tool string, args []string) (int, bool) {
	conn, req, fds, relay, code, ok := startCall(e, tool, args)
	if conn < 0 {
		return code, ok
	}
	defer fsops.CloseFD(conn)
	code, cancelled := awaitBroker(e, conn, req, fds, relay, "the run host", ctx.Done(), nil, nil)
	if cancelled {
		return cli.Failure, true
	}
	return code, true
}

// awaitBroker sends req and waits for the host's answer (see CallBroker).
// When cancel is closed first it cancels the call on the host and waits
// for the host to say the tool is gone, until abandon is closed or the
// host's own bound has passed; cancelled then reports it. slow, unless
// nil, is called once the answer has not come within signalGrace (a
// bound on the receive: a timer would start a thread for itself), before
// which nothing can cancel the call.
func awaitBroker(e *cli.Env, conn int, req broker.Request, fds []int, relay *descriptorRelay, host string, cancel, abandon <-chan struct{}, slow func()) (code int, cancelled bool) {
	err := broker.Send(conn, req, fds)
	relay.closeChildEnds()
	if err != nil {
		return cli.Fail(e, cli.Unavailable, "%s did not take the call: %v", host, err), false
	}
	answer := make(chan broker.Reply, 1)
	receive := func() {
		var reply broker.Reply
		if _, err := broker.Recv(conn, &reply, 0); err != nil {
			reply = broker.Reply{Exit: cli.Unavailable, Error: host + " went away: " + err.Error()}
		}
		answer <- reply
	}
	if slow != nil {
		// Nothing cancels the call yet: the answer is awaited here,
		// without a goroutine to hand it over, for signalGrace.
		var reply broker.Reply
		if got, err := broker.RecvWithin(conn, &reply, signalGrace); err != nil {
			answer <- broker.Reply{Exit: cli.Unavailable, Error: host + " went away: " + err.Error()}
		} else if got {
			answer <- reply
		} else {
			slow()
		}
	}
	if len(answer) == 0 {
		go receive()
	}
	select {
	case reply := <-answer:
		relay.wait()
		if reply.Error != "" {
			// The host's message names the tool first: "TOOL: why". A
			// refusal is marked as every refusal of ctx is.
			name, msg, ok := strings.Cut(strings.TrimPrefix(reply.Error, cli.DeniedPrefix), ": ")
			if !ok {
				name, msg = e.Name, reply.Error
			}
			if reply.Exit == cli.Denied {
				cli.Deniedf(e.Stderr, name, "%s", msg)
			} else {
				cli.Errorf(e.Stderr, name, "%s", msg)
			}
		}
		return reply.Exit, false
	case <-cancel:
		// The host ends the tool's process tree and answers once it is
		// gone. Waiting for that answer keeps what the tool writes last
		// (shell.exec's "command cancelled" on the terminal we share) ahead
		// of what our caller writes next: tsh's prompt, the person's shell
		// prompt.
		broker.CancelCall(conn)
		select {
		case <-answer:
			relay.wait()
		case <-abandon:
		case <-time.After(cancelAnswerWait):
		}
		return 0, true
	}
}

// descriptorRelay copies between the caller's streams and pipes when a
// stream is not a file (tsh running a tool in its own process with its
// output captured).
type descriptorRelay struct {
	child []*os.File // pipe ends passed to the tool
	wg    sync.WaitGroup
}

func (r *descriptorRelay) closeChildEnds() {
	for _, f := range r.child {
		f.Close()
	}
}

func (r *descriptorRelay) wait() { r.wg.Wait() }

// StandardDescriptors returns the descriptors to pass as the tool's 0, 1
// and 2: the streams' own when they are files, else pipes relayed here.
func StandardDescriptors(e *cli.Env) ([]int, *descriptorRelay, error) {
	relay := &descriptorRelay{}
	fds := make([]int, 3)
	streams := []any{e.Stdin, e.Stdout, e.Stderr}
	for i, s := range streams {
		if f, ok := s.(*os.File); ok {
			fds[i] = int(f.Fd())
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		if i == 0 {
			fds[i] = int(r.Fd())
			relay.child = append(relay.child, r)
			go func(src io.Reader) {
				if src != nil {
					io.Copy(w, src)
				}
				w.Close()
			}(e.Stdin)
			continue
		}
		fds[i] = int(w.Fd())
		relay.child = append(relay.child, w)
		relay.wg.Add(1)
		go func(dst io.Writer) {
			defer relay.wg.Done()
			io.Copy(dst, r)
			r.Close()
		}(s.(io.Writer))
	}
	return fds, relay, nil
}
