package ptyterm

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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

// ReadSecret reads the secret of the terminal served at socket.
func ReadSecret(socket string) (string, error) {
	path := SecretPath(socket)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	b := make([]byte, maxSecretLine)
	n, err := unix.Read(fd, b)
	if err != nil {
		return "", &os.PathError{Op: "read", Path: path, Err: err}
	}
	s := strings.TrimSpace(string(b[:max(n, 0)]))
	if s == "" || strings.ContainsAny(s, " \n") {
		return "", &os.PathError{Op: "read", Path: path, Err: errors.New("not a terminal secret")}
	}
	return s, nil
}

// writeSecret writes secret to SecretPath(socket), mode 0600, replacing
// an old one atomically and following no symlink.
func writeSecret(socket, secret string) error {
	path := SecretPath(socket)
	tmp := filepath.Join(filepath.Dir(path), ".new-"+filepath.Base(path))
	os.Remove(tmp)
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: tmp, Err: err}
	}
	_, err = unix.Write(fd, []byte(secret+"\n"))
	unix.Close(fd)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
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

// secretMatches compares in constant time; an empty secret never matches.
func secretMatches(presented, secret string) bool {
	return presented != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(secret)) == 1
}
