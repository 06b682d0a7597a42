package object

import "testing"

// FuzzParseInput: what the input control accepts is exactly argv or stdin,
// with at most a final newline.
func FuzzParseInput(f *testing.F) {
	f.Add([]byte("argv\n"))
	f.Add([]byte("stdin"))
	f.Add([]byte(" stdin\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseInput(data)
		if err != nil {
			return
		}
		if (v != InputArgv && v != InputStdin) || (string(data) != v && string(data) != v+"\n") {
			t.Fatalf("%q parsed as %q", data, v)
		}
	})
}
