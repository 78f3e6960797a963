package engines

import "testing"

// byPatterns applies urlPassword and keyLike to line, as Mask does after
// the known secrets, whatever the line holds.
func byPatterns(line string) string {
	line = urlPassword.ReplaceAllString(line, "${1}"+maskedValue+"@")
	for _, re := range keyLike {
		line = re.ReplaceAllString(line, "${1}"+maskedValue)
	}
	return line
}

// FuzzMaskWordsNeverSkipAMatch: a line the patterns would change always
// holds one of patternWords, so Mask's shortcut never leaves a key bare.
func FuzzMaskWordsNeverSkipAMatch(f *testing.F) {
	for _, s := range []string{
		"OpenAI/Python 1.99.0", "s-1", "Bearer abcdefgh", "BASIC dXNlcjpwdw==", "--api-key sk-0123456789abcdef",
		"-TOKEN=abcd", `"apiKey": "abcdefgh"`, "OPENAI_API_KEY=abcd1234", "Password: hunter22", "x-authorization=abcd",
		"redis://:pw@host", "postgres://u:p@h/db", "hf_0123456789abcdef", "gsk_0123456789abcdef", "ghp_0123456789abcdef",
		"xoxb_0123456789abcdef", "AKIA0123456789ABCDEF", "pk-0123456789abcdef", "rk-0123456789abcdef",
		"to\u212aen=abcd1234", "ſecret=abcd1234", "Mozilla/5.0 (X11; Linux x86_64) like Gecko",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if byPatterns(line) != line && !mayLookLikeKey(line) {
			t.Fatalf("%q is masked by the patterns, but holds none of their words", line)
		}
	})
}

func TestAHeaderWithoutAKeyIsMaskedWithoutThePatterns(t *testing.T) {
	for _, s := range []string{"OpenAI/Python 1.99.0", "s-1", "AsyncAnthropic/Python 0.60.0", "curl/8.5.0"} {
		if mayLookLikeKey(s) || Mask(s, nil) != s {
			t.Errorf("%q: runs the patterns", s)
		}
	}
	for _, s := range []string{"my sk-0123456789abcdefgh agent", "Bearer abcdefgh12"} {
		if Mask(s, nil) == s {
			t.Errorf("%q: not masked", s)
		}
	}
}

// BenchmarkMaskHeaders is a request's two headers as its history record
// masks them: within the record's 2 µs.
func BenchmarkMaskHeaders(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Mask("OpenAI/Python 1.99.0", nil)
		Mask("session-0123456789", nil)
	}
}
