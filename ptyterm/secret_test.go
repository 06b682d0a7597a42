package ptyterm

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestSecretRefusesOwnerWithoutIt: a terminal served with a secret refuses
// a client of the owner's uid that attaches as the seed's protocol has it,
// or with a wrong secret, and its input never reaches the PTY; the client
// that reads the secret beside the socket attaches and types. The secret
// file is 0600 and goes with the terminal.
func TestSecretRefusesOwnerWithoutIt(t *testing.T) {
	secret := strings.Repeat("ab", 32)
	s := serve(t, Config{Secret: secret}, "cat")
	st, err := os.Stat(SecretPath(s.socket))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", st, err)
	}
	for _, hello := range []string{"attach\nintruder\n", "secret " + strings.Repeat("0", 64) + "\nattach\nintruder\n", "secret \nattach\n"} {
		c := dial(t, s.socket, hello)
		c.closed(t)
		if !strings.Contains(c.out.String(), "ctxterm: denied:") {
			t.Fatalf("%q: not refused: %q", hello, c.out.String())
		}
	}
	got, err := ReadSecret(s.socket)
	if err != nil || got != secret {
		t.Fatalf("ReadSecret: %q %v", got, err)
	}
	out := newSyncBuffer()
	end, err := Connect(s.socket, Attach, strings.NewReader("mine\n\x04"), out, ClientOptions{Secret: got})
	if err != nil || end != EndClosed {
		t.Fatalf("attach with the secret: %v %v", end, err)
	}
	if code := s.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	rec := string(replayed(t, s.events))
	if strings.Contains(rec, "intruder") || !strings.Contains(rec, "mine") {
		t.Fatalf("PTY saw %q", rec)
	}
	if _, err := os.Stat(SecretPath(s.socket)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("secret file left behind: %v", err)
	}
}

// FuzzSecretLine: parseSecretLine never reads past maxSecretLine, accepts
// only "secret " and lower-case hex up to a newline, and a line it accepts
// is decided the same whatever follows it.
func FuzzSecretLine(f *testing.F) {
	f.Add([]byte("secret " + strings.Repeat("ab", 32) + "\nattach\n"))
	f.Add([]byte("secret \n"))
	f.Add([]byte("attach\n"))
	f.Add([]byte("secret 0g\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, n, err := parseSecretLine(b)
		if err != nil {
			if s != "" || n != 0 {
				t.Fatalf("error with a result: %q %d %v", s, n, err)
			}
			return
		}
		if n > maxSecretLine || n > len(b) || b[n-1] != '\n' || string(b[:n]) != secretPrefix+s+"\n" || s == "" {
			t.Fatalf("accepted %q as %q (%d)", b, s, n)
		}
		for _, c := range s {
			if !strings.ContainsRune("0123456789abcdef", c) {
				t.Fatalf("accepted %q", s)
			}
		}
		if s2, n2, err := parseSecretLine(b[:n]); err != nil || s2 != s || n2 != n {
			t.Fatalf("the line alone decides otherwise: %q %d %v", s2, n2, err)
		}
	})
}
