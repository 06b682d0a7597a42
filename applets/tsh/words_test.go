package tsh

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   \t ", nil},
		{"which fs.read", []string{"which", "fs.read"}},
		{"  fs.read   a\tb  ", []string{"fs.read", "a", "b"}},
		{`shell.exec 'echo "hi" | wc'`, []string{"shell.exec", `echo "hi" | wc`}},
		{`a "b c" d`, []string{"a", "b c", "d"}},
		{`a "x\"y\\z"`, []string{"a", `x"y\z`}},
		{`a 'x\y'`, []string{"a", `x\y`}},
		{`a\ b c`, []string{"a b", "c"}},
		{`a\'b`, []string{"a'b"}},
		{`x'a'"b"c`, []string{"xabc"}},
		{`'' ""`, []string{"", ""}},
		{`a | b > c ; d && $HOME *`, []string{"a", "|", "b", ">", "c", ";", "d", "&&", "$HOME", "*"}},
		{"# not a comment", []string{"#", "not", "a", "comment"}},
		{"käse 'ß'", []string{"käse", "ß"}},
		{"a\r\n", []string{"a"}},
		// a JSON object typed as a word keeps its quotes
		{`fs.read {"path":"a b"}`, []string{"fs.read", `{"path":"a b"}`}},
		{`fs.write {"path":"x","content":"} \" {"} next`, []string{"fs.write", `{"path":"x","content":"} \" {"}`, "next"}},
		{`t {"a":{"b":[1,{"c":"d"}]}}`, []string{"t", `{"a":{"b":[1,{"c":"d"}]}}`}},
		{`t {"unbalanced"`, []string{"t", `{unbalanced`}},
		{`t {"a"}x`, []string{"t", `{a}x`}},
		{`t x{"a"}`, []string{"t", `x{a}`}},
		{`t '{"a"}'`, []string{"t", `{"a"}`}},
	} {
		got, err := SplitWords(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for in, want := range map[string]error{
		`a 'b`:                         ErrUnterminatedSingle,
		`a "b`:                         ErrUnterminatedDouble,
		`a "b\"`:                       ErrUnterminatedDouble,
		`a "b\`:                        ErrUnterminatedDouble,
		`a \`:                          ErrTrailingBackslash,
		"a\x00b":                       ErrNulByte,
		strings.Repeat("x", MaxLine+1): ErrLineTooLong,
	} {
		if _, err := SplitWords(in); err != want {
			t.Errorf("SplitWords(%.20q...) err = %v, want %v", in, err, want)
		}
	}
	if w, err := SplitWords(strings.Repeat("x", MaxLine)); err != nil || len(w) != 1 {
		t.Errorf("a line of exactly MaxLine bytes: %v", err)
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{`which fs.read`, `a "b \" c" 'd'`, `x\ y`, `'`, `"\`, "a\x00", `fs.read {"path":"a b"}`, `{"a\"}"} {`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := SplitWords(line)
		if err != nil {
			return
		}
		// Quoting each word and splitting again must give the same words.
		var b strings.Builder
		for _, w := range words {
			b.WriteString(" '" + strings.ReplaceAll(w, "'", `'\''`) + "'")
		}
		again, err := SplitWords(b.String())
		if err != nil || !reflect.DeepEqual(again, words) && !(len(again) == 0 && len(words) == 0) {
			t.Fatalf("%q -> %q -> %q -> %q, %v", line, words, b.String(), again, err)
		}
	})
}
