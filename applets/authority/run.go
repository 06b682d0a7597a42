package authority

import (
	"encoding/json"
	"strconv"

	"golang.org/x/sys/unix"

	"ctx/fsops"
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

// Report hands a tool.call event to the run host. It reports false when
// this process holds no run capability (no CTX_RUN_FD, or not a socket),
// and the caller then logs the event itself.
func Report(getenv func(string) string, ev fsops.Event) bool {
	fd, err := strconv.Atoi(getenv("CTX_RUN_FD"))
	if err != nil || fd < 3 {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return false
	}
	msg, err := json.Marshal(RunMessage{Op: "event", Event: &ev})
	if err != nil || len(msg) > MaxRunMessage {
		return false
	}
	_, err = unix.Write(fd, msg)
	return err == nil
}
