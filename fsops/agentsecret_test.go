package fsops

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

const testSecret = "OPENAI_API_KEY=sk-never-shown-0123\n"

// secretTree is a tree directory owned by the caller, the tree owner.
func secretTree(t *testing.T) Root {
	t.Helper()
	r := Root{Dir: t.TempDir()}
	if err := os.Mkdir(r.AgentDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSecretFileRoundTrip: the file is written 0600 in a 0711 directory
// and read back; none is no file and no error; empty data removes it.
func TestSecretFileRoundTrip(t *testing.T) {
	r := secretTree(t)
	me := uint32(os.Geteuid())
	if b, err := r.ReadSecretFile("coder", me); b != nil || err != nil {
		t.Fatalf("no directory: %q %v", b, err)
	}
	if err := r.WriteSecretFile("coder", []byte(testSecret), -1); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Lstat(r.SecretFile("coder"))
	dst, _ := os.Lstat(r.SecretDir())
	if st.Mode().Perm() != SecretFileMode || dst.Mode().Perm() != SecretDirMode {
		t.Fatalf("modes %v %v", st.Mode(), dst.Mode())
	}
	if b, err := r.ReadSecretFile("coder", me); string(b) != testSecret || err != nil {
		t.Fatalf("read back %q %v", b, err)
	}
	if b, err := r.ReadSecretFile("architect", me); b != nil || err != nil {
		t.Fatalf("no file: %q %v", b, err)
	}
	if err := r.WriteSecretFile("coder", nil, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(r.SecretFile("coder")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("emptied file still there: %v", err)
	}
}

// TestSecretFileRefusals: a file or directory others may read or change,
// a symlink in either place, and a file a stranger owns are refused, each
// error without the value; nothing is read through a symlink.
func TestSecretFileRefusals(t *testing.T) {
	me := uint32(os.Geteuid())
	check := func(t *testing.T, r Root, want string) {
		t.Helper()
		b, err := r.ReadSecretFile("coder", me)
		if err == nil || b != nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("read %q, %v; want an error with %q", b, err, want)
		}
		if strings.Contains(err.Error(), "never-shown") {
			t.Fatalf("the error shows the value: %v", err)
		}
	}
	t.Run("file mode", func(t *testing.T) {
		r := secretTree(t)
		r.WriteSecretFile("coder", []byte(testSecret), -1)
		os.Chmod(r.SecretFile("coder"), 0o644)
		check(t, r, "mode 0644 lets other users read or change it")
		if err := r.WriteSecretFile("coder", []byte(testSecret), -1); err != nil {
			t.Fatal(err) // rewriting puts its mode right
		}
		if st, _ := os.Lstat(r.SecretFile("coder")); st.Mode().Perm() != 0o600 {
			t.Fatalf("rewritten %v", st.Mode())
		}
	})
	t.Run("dir mode", func(t *testing.T) {
		r := secretTree(t)
		r.WriteSecretFile("coder", []byte(testSecret), -1)
		os.Chmod(r.SecretDir(), 0o755)
		check(t, r, "secret: mode 0755 lets other users list or change it")
		if err := r.WriteSecretFile("coder", []byte("A=b\n"), -1); err == nil {
			t.Fatal("written into a directory others may list")
		}
	})
	t.Run("file symlink", func(t *testing.T) {
		r := secretTree(t)
		r.WriteSecretFile("architect", []byte(testSecret), -1)
		os.Symlink(r.SecretFile("architect"), r.SecretFile("coder"))
		check(t, r, "symlink")
		if err := r.WriteSecretFile("coder", []byte("A=b\n"), -1); err != nil {
			t.Fatal(err) // the link is replaced, never written through
		}
		if b, _ := os.ReadFile(r.SecretFile("architect")); string(b) != testSecret {
			t.Fatalf("written through the link: %q", b)
		}
	})
	t.Run("dir symlink", func(t *testing.T) {
		r := secretTree(t)
		other := t.TempDir()
		os.Chmod(other, 0o711)
		os.WriteFile(other+"/coder", []byte(testSecret), 0o600)
		os.Symlink(other, r.SecretDir())
		check(t, r, "not a directory")
		if err := r.WriteSecretFile("coder", []byte("A=b\n"), -1); err == nil {
			t.Fatal("written through a symlinked directory")
		}
	})
	t.Run("stranger", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("chown needs root")
		}
		r := secretTree(t)
		r.WriteSecretFile("coder", []byte(testSecret), 4242)
		if st, _ := os.Lstat(r.SecretFile("coder")); st.Sys().(*syscall.Stat_t).Uid != 4242 {
			t.Fatalf("written for uid 4242, owned by %d", st.Sys().(*syscall.Stat_t).Uid)
		}
		if b, err := r.ReadSecretFile("coder", 4242); err != nil || string(b) != testSecret {
			t.Fatalf("the agent owner's file: %q %v", b, err)
		}
		check(t, r, "owned by uid 4242, neither root, the tree owner (uid 0) nor the agent's owner (uid 0)")
	})
}
