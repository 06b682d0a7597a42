package queue

import (
	"regexp"
	"testing"
)

// TestPlainWordMatchesRegexp holds plainWord to the regexp it replaced,
// byte by byte and on words that need quoting or not.
func TestPlainWordMatchesRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9_./,:@%+=-]+$`)
	words := []string{"", "a", "/tmp/x y", "it's", "-", "a\nb", "é", "$HOME", "a*b", "/root/ctx-1/shared/s/queue", "x=1,y:2@h%3+4"}
	for c := 0; c < 256; c++ {
		words = append(words, string([]byte{byte(c)}), "ab"+string([]byte{byte(c)}))
	}
	for _, w := range words {
		if got, want := plainWord(w), re.MatchString(w); got != want {
			t.Errorf("plainWord(%q) = %v, the regexp says %v", w, got, want)
		}
	}
	if got := shellWord("it's here"); got != `'it'\''s here'` {
		t.Errorf("shellWord: %s", got)
	}
}
