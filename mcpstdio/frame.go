package mcpstdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MaxFrame bounds one JSON-RPC message line.
const MaxFrame = 1 << 20

// ErrFrameTooLarge is returned for a line longer than MaxFrame. Its text
// is spelled out (errors.New, not fmt.Errorf, which every applet's start
// would run at package initialisation).
var ErrFrameTooLarge = errors.New("frame exceeds 1048576 bytes")

// readFrame reads one newline-terminated line of at most MaxFrame bytes
// (the newline excluded). A longer line is consumed up to its newline and
// reported as ErrFrameTooLarge, so a reader can resynchronise (the server
// answers a client's oversized request and goes on).
func readFrame(r *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLarge := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLarge {
			if len(line)+len(chunk) > MaxFrame+1 {
				tooLarge, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			if tooLarge {
				return nil, ErrFrameTooLarge
			}
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0 && !tooLarge:
			return nil, io.ErrUnexpectedEOF // a last line without its newline
		default:
			if tooLarge {
				return nil, ErrFrameTooLarge
			}
			return nil, err
		}
	}
}

// readFrameOrStop is readFrame for a reader that ends the session on an
// oversized frame (the client, reading a server): ErrFrameTooLarge comes
// as soon as more than MaxFrame bytes have arrived without a newline, not
// when a newline finally comes, which a misbehaving server may never send
// (ReadSlice would wait for it, or for a full buffer, holding the bytes
// that already prove the frame too large). It only ever waits when nothing
// is buffered.
func readFrameOrStop(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		if r.Buffered() == 0 {
			if _, err := r.Peek(1); err != nil {
				if err == io.EOF && len(line) > 0 {
					return nil, io.ErrUnexpectedEOF // a last line without its newline
				}
				return nil, err
			}
		}
		buf, _ := r.Peek(r.Buffered())
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			if len(line)+i > MaxFrame {
				return nil, ErrFrameTooLarge
			}
			line = append(line, buf[:i]...)
			r.Discard(i + 1)
			return line, nil
		}
		if len(line)+len(buf) > MaxFrame {
			return nil, ErrFrameTooLarge
		}
		line = append(line, buf...)
		r.Discard(len(buf))
	}
}

// message is any JSON-RPC 2.0 message.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// JSON-RPC error codes used here.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
)

func (m *message) isRequest() bool      { return m.Method != "" && len(m.ID) > 0 }
func (m *message) isNotification() bool { return m.Method != "" && len(m.ID) == 0 }
func (m *message) isResponse() bool     { return m.Method == "" && len(m.ID) > 0 }

// parseMessage decodes one frame and checks the JSON-RPC 2.0 envelope.
func parseMessage(frame []byte) (*message, error) {
	var m message
	if err := json.Unmarshal(frame, &m); err != nil {
		return nil, fmt.Errorf("malformed JSON-RPC frame: %v", err)
	}
	if m.JSONRPC != "2.0" {
		return nil, fmt.Errorf("malformed JSON-RPC frame: jsonrpc is %q, not \"2.0\"", m.JSONRPC)
	}
	if string(m.ID) == "null" {
		m.ID = nil
	}
	if len(m.ID) > 0 && m.ID[0] != '"' && (m.ID[0] < '0' || m.ID[0] > '9') && m.ID[0] != '-' {
		return nil, fmt.Errorf("malformed JSON-RPC frame: id must be a string or a number")
	}
	if !m.isRequest() && !m.isNotification() && !m.isResponse() {
		if m.Method == "" && len(m.ID) == 0 && m.Error != nil {
			return &m, nil // an error answering something that had no usable id
		}
		return nil, fmt.Errorf("malformed JSON-RPC frame: neither request, notification nor response")
	}
	return &m, nil
}

// intID parses a numeric id; our own requests use integers only.
func intID(raw json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// encodeFrame marshals v as one line.
func encodeFrame(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mcpstdio: unencodable frame: " + err.Error())
	}
	return append(b, '\n')
}
