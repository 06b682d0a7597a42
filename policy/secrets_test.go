package policy

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParseSecrets(t *testing.T) {
	got, err := ParseSecrets("coder", []byte("OPENAI_API_KEY=sk-abc=def\r\nANTHROPIC_API_KEY=x y\n_A1=z"))
	want := []EnvVar{{"OPENAI_API_KEY", "sk-abc=def"}, {"ANTHROPIC_API_KEY", "x y"}, {"_A1", "z"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	if got, err := ParseSecrets("coder", nil); err != nil || got != nil {
		t.Fatalf("empty file: %v, %v", got, err)
	}
}

// TestParseSecretsRefusals: each refusal names the file, the line and the
// field, and never repeats a value, nor a part of a line that may be one.
func TestParseSecretsRefusals(t *testing.T) {
	const value = "sk-VALUE-never-shown"
	for _, c := range []struct {
		data string
		line int
		kind ErrorKind
		want string
	}{
		{"A=1\n" + value + "\n", 2, KindInvalidValue, "not VAR=value"},
		{"\n", 1, KindInvalidValue, "not VAR=value"},
		{"openai_key=" + value + "\n", 1, KindInvalidName, "upper case"},
		{value + "=" + value + "\n", 1, KindInvalidName, "not shown"},
		{"=" + value + "\n", 1, KindInvalidName, "empty"},
		{"1A=" + value + "\n", 1, KindInvalidName, "[A-Z_]"},
		{strings.Repeat("A", MaxSecretKeyLen+1) + "=" + value + "\n", 1, KindInvalidName, "at most 128"},
		{"CTX_AGENT=" + value + "\n", 1, KindForbidden, "CTX_AGENT: CTX_*"},
		{"PATH=" + value + "\n", 1, KindForbidden, "PATH is set by ctx"},
		{"HOME=" + value + "\n", 1, KindForbidden, "HOME is set by ctx"},
		{"HTTPS_PROXY=" + value + "\n", 1, KindForbidden, "egress proxy"},
		{"GIT_CONFIG_KEY_0=" + value + "\n", 1, KindForbidden, "GIT_CONFIG_*"},
		{"A=\n", 1, KindInvalidValue, "value of A is empty"},
		{"A= " + value + "\n", 1, KindInvalidValue, "blank"},
		{"A=" + value + " \n", 1, KindInvalidValue, "blank"},
		{"A=" + value + "\x00x\n", 1, KindInvalidValue, "control byte"},
		{"A=" + value + "\tx\n", 1, KindInvalidValue, "control byte"},
		{"A=" + value + "\rx\n", 1, KindInvalidValue, "control byte"},
		{"A=1\nB=2\nA=" + value + "\n", 3, KindDuplicate, "A already set on line 1"},
		{"# a comment\n", 1, KindInvalidValue, "not VAR=value"},
	} {
		_, err := ParseSecrets("coder", []byte(c.data))
		var ce *ControlError
		if !errors.As(err, &ce) {
			t.Errorf("%q: error %v, want a *ControlError", c.data, err)
			continue
		}
		msg := err.Error()
		if ce.Control != "coder" || ce.Line != c.line || ce.Kind != c.kind || !strings.Contains(msg, c.want) {
			t.Errorf("%q: %s (line %d, %v); want line %d, %v, %q", c.data, msg, ce.Line, ce.Kind, c.line, c.kind, c.want)
		}
		if strings.Contains(msg, "VALUE") || strings.Contains(msg, "openai_key") {
			t.Errorf("%q: the error shows a value: %s", c.data, msg)
		}
	}
	var many bytes.Buffer
	for i := 0; i <= MaxSecrets; i++ {
		many.WriteString("K" + strconv.Itoa(i) + "=v\n")
	}
	if _, err := ParseSecrets("coder", many.Bytes()); err == nil || !strings.Contains(err.Error(), "more than 256") {
		t.Errorf("%d secrets: %v", MaxSecrets+1, err)
	}
}

func TestWithSecrets(t *testing.T) {
	env := []string{"HOME=/home/agent", "EDITOR=vi"}
	secrets := []EnvVar{{"API_KEY", "k1"}, {"OTHER", "k2"}}
	if got := WithSecrets(env, secrets, false); !reflect.DeepEqual(got, []string{"HOME=/home/agent", "EDITOR=vi", "API_KEY=k1", "OTHER=k2"}) {
		t.Errorf("run: %v", got)
	}
	shown := WithSecrets(env, secrets, true)
	if !reflect.DeepEqual(shown, []string{"HOME=/home/agent", "EDITOR=vi", "API_KEY=<secret>", "OTHER=<secret>"}) {
		t.Errorf("shown: %v", shown)
	}
	if env[1] != "EDITOR=vi" || len(env) != 2 {
		t.Errorf("env changed: %v", env)
	}
	if err := SecretsCollide([]EnvVar{{"EDITOR", "vi"}, {"API_KEY", "x"}}, secrets); err == nil || !strings.Contains(err.Error(), "API_KEY is set both") {
		t.Errorf("collision: %v", err)
	}
	if err := SecretsCollide([]EnvVar{{"EDITOR", "vi"}}, secrets); err != nil {
		t.Errorf("no collision: %v", err)
	}
}

func TestSecretFileProblem(t *testing.T) {
	const tree, agentOwner = 1000, 1001
	for _, c := range []struct {
		uid, perm uint32
		regular   bool
		want      string
	}{
		{1000, 0o600, true, ""},
		{0, 0o400, true, ""},
		{1001, 0o600, true, ""},
		{1000, 0o640, true, "mode 0640"},
		{1000, 0o604, true, "mode 0604"},
		{1000, 0o620, true, "mode 0620"},
		{1002, 0o600, true, "owned by uid 1002"},
		{1000, 0o600, false, "not a regular file"},
	} {
		if got := SecretFileProblem(c.uid, c.perm, c.regular, tree, agentOwner); c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("file uid %d mode %o: %q, want %q", c.uid, c.perm, got, c.want)
		}
	}
	for _, c := range []struct {
		uid, perm uint32
		want      string
	}{
		{1000, 0o711, ""},
		{0, 0o700, ""},
		{1000, 0o755, "mode 0755"},
		{1000, 0o1733, "mode 1733"},
		{1001, 0o700, "owned by uid 1001"},
	} {
		if got := SecretDirProblem(c.uid, c.perm, tree); c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("dir uid %d mode %o: %q, want %q", c.uid, c.perm, got, c.want)
		}
	}
}

// FuzzParseSecrets: an accepted file renders canonically and parses back
// to the same variables, each a valid name ctx does not set, with a value
// of one line of text; a refusal is a *ControlError for a line of the
// input that repeats no value (nor any text after a line's first =) and
// no name that is not a variable name.
func FuzzParseSecrets(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := ParseSecrets("coder", data)
		if err != nil {
			checkControlError(t, "coder", data, err)
			checkNoValueShown(t, data, err.Error())
			return
		}
		for _, v := range vars {
			if !ValidSecretKey(v.Key) || SecretKeyRefused(v.Key) != "" || CheckSecretValue(v.Value) != "" {
				t.Fatalf("accepted %q=%q", v.Key, v.Value)
			}
		}
		canon := FormatSecrets(vars)
		v2, err := ParseSecrets("coder", canon)
		if err != nil || !reflect.DeepEqual(vars, v2) || !bytes.Equal(FormatSecrets(v2), canon) {
			t.Fatalf("round trip of %q: %v", canon, err)
		}
	})
}

// checkNoValueShown fails when msg repeats what follows the first = of a
// line of data, or a part before it that is not a variable name (either
// may be a pasted key), when that part is long enough to tell from the
// message's own words and is no variable name (which another line may
// hold as its name, and its error show).
func checkNoValueShown(t *testing.T, data []byte, msg string) {
	t.Helper()
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		key, value, ok := bytes.Cut(line, []byte{'='})
		parts := [][]byte{value}
		if !ok || !ValidSecretKey(string(key)) {
			parts = append(parts, key)
		}
		for _, p := range parts {
			p = bytes.TrimSpace(p)
			if len(p) >= 12 && !ValidSecretKey(string(p)) && strings.Contains(msg, string(p)) {
				t.Fatalf("the error %q repeats %q of the input", msg, p)
			}
		}
	}
}
