package ptyterm

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"ctx/fsops"
)

// Replay writes the PTY output recorded in eventsFile to w, in order:
// exactly the bytes the program wrote to its terminal, as the terminal
// driver delivered them. Other event types are skipped. A last line without
// its newline (a write cut short) is ignored; a malformed complete line is
// an error naming the file and line.
func Replay(eventsFile string, w io.Writer) error {
	return scanEvents(eventsFile, func(ev *Event) error {
		if ev.Type != EventOutput {
			return nil
		}
		data, err := base64.StdEncoding.DecodeString(ev.DataB64)
		if err != nil {
			return fmt.Errorf("data_b64: %v", err)
		}
		if _, err := w.Write(data); err != nil {
			return errWrite{err}
		}
		return nil
	})
}

// errWrite marks an error of the destination writer in scanEvents, which
// is not the record's fault and carries no line number.
type errWrite struct{ error }

func scanEvents(path string, each func(*Event) error) error {
	f, err := fsops.OpenRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, maxReplayLine)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("%s:%d: line longer than %d bytes", path, n, maxReplayLine)
		}
		if err == io.EOF {
			return nil // a partial last line is a write cut short
		}
		if err != nil {
			return &os.PathError{Op: "read", Path: path, Err: err}
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
		if err := each(&ev); err != nil {
			if we, ok := err.(errWrite); ok {
				return we.error
			}
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
	}
}
