package ptyterm

import (
	"bytes"
	"encoding/base64"
	"math/rand"
	"testing"
)

// appendBase64 is encoding/base64.StdEncoding, byte for byte: every
// length up to a few lines, and any prefix already in dst.
func TestAppendBase64(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for n := 0; n < 3*maxOutputData; n++ {
		src := make([]byte, n)
		rng.Read(src)
		prefix := []byte("x")[:n%2]
		got := appendBase64(append([]byte(nil), prefix...), src)
		want := base64.StdEncoding.AppendEncode(append([]byte(nil), prefix...), src)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: got %q, want %q", n, got, want)
		}
	}
}

func FuzzAppendBase64(f *testing.F) {
	f.Add([]byte("hello, world\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		if got, want := appendBase64(nil, src), base64.StdEncoding.AppendEncode(nil, src); !bytes.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

func BenchmarkAppendBase64(b *testing.B) {
	src := bytes.Repeat([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n"), maxOutputData/64)
	buf := make([]byte, 0, 2*maxOutputData)
	b.Run("ctx", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			buf = appendBase64(buf[:0], src)
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			buf = base64.StdEncoding.AppendEncode(buf[:0], src)
		}
	})
}
