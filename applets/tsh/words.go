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
//     of quotes with nothing inside is an empty word;
//   - a word that starts with { and runs, with its braces balanced outside
//     JSON strings, to a matching } followed by a blank or the end of the
//     line is taken exactly as typed: fs.read {"path":"a b"} passes the
//     JSON object, the way a person types a tool's input, where a shell
//     would have removed its double quotes.
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
		case '{':
			if end := jsonObjectEnd(line, i); !inWord && end > 0 {
				cur.WriteString(line[i:end])
				i = end - 1
			} else {
				cur.WriteByte(c)
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

// jsonObjectEnd returns the index just past the } that closes the { at
// line[start], counting braces outside JSON strings (where a backslash
// escapes the next byte), when a blank or the end of the line follows it;
// else 0.
func jsonObjectEnd(line string, start int) int {
	depth := 0
	inString := false
	for i := start; i < len(line); i++ {
		c := line[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				if i+1 == len(line) || strings.IndexByte(" \t\r\n", line[i+1]) >= 0 {
					return i + 1
				}
				return 0
			}
		}
	}
	return 0
}
