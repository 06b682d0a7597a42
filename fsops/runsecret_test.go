package fsops

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRunSecretFile: the secret is written 0600 in a 0700 directory and read
// back; a directory others may read is refused, a symlinked file is not
// followed, and the comparison matches only the secret itself.
func TestRunSecretFile(t *testing.T) {
	runtime := t.TempDir()
	secret, err := NewRunSecret()
	if err != nil {
		t.Fatal(err)
	}
	path := RunSecretPath(runtime, "run1")
	if err := WriteRunSecret(path, secret); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	dst, _ := os.Stat(filepath.Dir(path))
	if st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Fatalf("modes %v %v", st.Mode(), dst.Mode())
	}
	got, err := ReadRunSecret(path)
	if err != nil || !SecretsEqual(got, secret) {
		t.Fatalf("read back %q %v", got, err)
	}
	if SecretsEqual("", "") || SecretsEqual(secret[:63]+"0", secret) && secret[63] != '0' {
		t.Fatal("an empty or different secret matches")
	}
	os.Chmod(filepath.Dir(path), 0o755)
	if err := WriteRunSecret(RunSecretPath(runtime, "run2"), secret); err == nil {
		t.Fatal("a secret written in a directory others may read")
	}
	os.Chmod(filepath.Dir(path), 0o700)
	link := RunSecretPath(runtime, "link")
	os.Symlink(path, link)
	if _, err := ReadRunSecret(link); err == nil {
		t.Fatal("a symlinked secret was followed")
	}
}
