package ptyterm

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"ctx/fsops"
)

// A terminal served with a secret (Config.Secret: the run's, DESIGN §16
// rule 12) asks each socket client, after the SO_PEERCRED check, for one
// line "secret HEX\n" before the seed's mode line ("watch\n" or
// "attach\n"): the owner's uid is shared by agents of that user (iso
// landlock), the secret is not. Serve keeps the secret beside the socket
// (SecretPath, mode 0600 in the socket's private directory) while it
// listens, where the person's clients read it.

// secretPrefix starts the secret line.
const secretPrefix = "secret "

// maxSecretLine bounds the secret line, newline included.
const maxSecretLine = len(secretPrefix) + 128 + 1

var (
	errSecretIncomplete = errors.New("incomplete secret line")
	errBadSecret        = errors.New(`expected "secret HEX" and a newline`)
)

// SecretPath is where a terminal served at socket keeps its secret:
// main.sock's is main.key, beside it.
func SecretPath(socket string) string {
	return strings.TrimSuffix(socket, ".sock") + ".key"
}

// ReadSecret reads the secret of the terminal served at socket: the run's
// secret, in the run secret's file format (fsops.ReadRunSecret).
func ReadSecret(socket string) (string, error) {
	return fsops.ReadRunSecret(SecretPath(socket))
}

// parseSecretLine decides the secret line at the start of b: the secret
// and the line's length (newline included); errSecretIncomplete while b
// may still become one, errBadSecret as soon as it cannot.
func parseSecretLine(b []byte) (string, int, error) {
	p := []byte(secretPrefix)
	if len(b) < len(p) {
		if bytes.HasPrefix(p, b) {
			return "", 0, errSecretIncomplete
		}
		return "", 0, errBadSecret
	}
	if !bytes.HasPrefix(b, p) {
		return "", 0, errBadSecret
	}
	for i := len(p); i < len(b) && i < maxSecretLine; i++ {
		c := b[i]
		switch {
		case c == '\n' && i > len(p):
			return string(b[len(p):i]), i + 1, nil
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		default:
			return "", 0, errBadSecret
		}
	}
	if len(b) >= maxSecretLine {
		return "", 0, errBadSecret
	}
	return "", 0, errSecretIncomplete
}

// readSecretLine reads the secret line from r a byte at a time: what
// follows it (the mode line, then an attaching client's input) stays
// unread for the mode line's reader and the hub.
func readSecretLine(r io.Reader) (string, error) {
	var buf [maxSecretLine]byte
	n := 0
	for {
		s, _, err := parseSecretLine(buf[:n])
		if err == nil {
			return s, nil
		}
		if err != errSecretIncomplete {
			return "", err
		}
		k, rerr := r.Read(buf[n : n+1])
		n += k
		if rerr != nil && k == 0 {
			if rerr == io.EOF {
				return "", io.ErrUnexpectedEOF
			}
			return "", rerr
		}
	}
}
