package tsh

import (
	"errors"
	"strings"
)

// MaxLine bounds one REPL line: 1 MiB.
const MaxLine = 1 << 20

// Word-splitting errors; the REPL prints them and reads the next line.
var (
	ErrUnterminatedSingle = errors.New("unterminated single quote")
	ErrUnterminatedDouble = errors.New("unterminated double quote")
	ErrTrailingBackslash  = errors.New("trailing backslash")
	ErrNulByte            = errors.New("NUL byte in line")
	ErrLineTooLong        = errors.New("line longer than 1 MiB")
)

// SplitWords splits a REPL line into words. It is deliberately not a shell:
//
//   - blanks (space, tab, CR, LF) separate words;
//   - '...' groups its bytes literally;
//   - "..." groups its bytes, and a backslash in it takes the next byte
//     literally;
//   - outside quotes a backslash takes the next byte literally;
//   - quotes may join a word's parts: a'b'"c" is the word abc, and a pair
//     of quotes with nothing inside is an empty word.
//
// Nothing else is special: no variables, globs, comments, pipes or
// redirections. A word such as |, >, ; or $HOME is passed on as it is.
func SplitWords(line string) ([]string, error) {
	if len(line) > MaxLine {
		return nil, ErrLineTooLong
	}
	if strings.IndexByte(line, 0) >= 0 {
		return nil, ErrNulByte
	}
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t', '\r', '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\\':
			if i+1 == len(line) {
				return nil, ErrTrailingBackslash
			}
			i++
			cur.WriteByte(line[i])
			inWord = true
		case '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, ErrUnterminatedSingle
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' {
					if i+1 == len(line) {
						return nil, ErrUnterminatedDouble
					}
					i++
				}
				cur.WriteByte(line[i])
			}
			if i == len(line) {
				return nil, ErrUnterminatedDouble
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
