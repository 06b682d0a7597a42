package authority

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"ctx/fsops"
	"ctx/fsops/broker"
)

// RunMessage is one message on the run capability: a SOCK_SEQPACKET
// socket whose other end the run host holds. Only processes of the run
// inherit it, so the host knows agent, session and run without being told;
// fields that name them are ignored and overwritten by the host.
type RunMessage struct {
	Op    string       `json:"op"` // "event"
	Event *fsops.Event `json:"event,omitempty"`
}

// MaxRunMessage bounds one message.
const MaxRunMessage = 64 << 10

// reportTimeout bounds the wait for the run host's acknowledgement.
const reportTimeout = 5 * time.Second

// Report hands a tool.call event to the run host and waits until the host
// has taken it: the host checks the sender's executable through its pid,
// which is only meaningful while the sender is alive. It reports false
// when this process holds no run capability (no CTX_RUN_FD, or not a
// socket), and the caller then logs the event itself.
func Report(getenv func(string) string, ev fsops.Event) bool {
	fd, ok := broker.RunFDFromEnv(getenv)
	if !ok {
		return false
	}
	msg, err := json.Marshal(RunMessage{Op: "event", Event: &ev})
	if err != nil || len(msg) > MaxRunMessage {
		return false
	}
	return broker.SendToRun(fd, msg, reportTimeout)
}

// RecordToolCall records one tool.call event, the one every call (allowed,
// denied or failed) leaves, wherever it was decided: a tool recording its
// own call, or tsh recording a refusal made before the tool ran. The
// agent, session and run come from the environment (the run host
// overwrites them with what it knows). Inside a run the event goes to the
// run host, which writes the session, the agent's log and the tool's log;
// a process with no run capability appends it to the log in controlDir
// (tool/NAME.d/log) beside the executable. The error says why it could
// not be appended; the caller warns, and the call's outcome stands.
func RecordToolCall(getenv func(string) string, controlDir string, ev fsops.Event) error {
	ev.Type = "tool.call"
	ev.Agent = getenv("CTX_AGENT")
	ev.Session = getenv("CTX_SESSION")
	ev.Run = getenv("CTX_RUN_ID")
	uid := os.Getuid()
	ev.UID = &uid
	if Report(getenv, ev) || controlDir == "" {
		return nil
	}
	return fsops.AppendLogEvent(filepath.Join(controlDir, "log"), ev)
}
