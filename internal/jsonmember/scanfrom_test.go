package jsonmember

import (
	"testing"
)

const chunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`

// A chunk that repeats the last one's first members is taken up at its
// first composite member, and the scan finds what a whole scan finds.
func TestScanFromFindsWhatScanFinds(t *testing.T) {
	var r Resume
	var first Fields
	if err := first.ScanNoting([]byte(chunk), Answer, &r); err != nil {
		t.Fatal(err)
	}
	if want := len(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m",`); r.At != want {
		t.Fatalf("noted at %d, want %d (the key of choices)", r.At, want)
	}
	prefix := []byte(chunk[:r.At+1])
	for _, next := range []string{
		chunk[:r.At] + `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
		chunk[:r.At] + `"choices":[]}`,
		chunk[:r.At] + `"choices":[{"index":0,"delta":{"content":"x"}}],"model":"again"}`, // a member repeated after
		chunk[:r.At] + `"choices":[{"index":0,"delta":{"content":"x"}}]`,                  // cut: invalid
		chunk[:r.At] + `"choices":[{"index":0,"delta":{"content":"x\u00"}}]}`,             // invalid
	} {
		b := []byte(next)
		if !r.Resumes(b, prefix, Answer) {
			t.Fatalf("%s: does not resume", next)
		}
		var whole, taken Fields
		errWhole, errTaken := whole.Scan(b, Answer), taken.ScanFrom(b, &r)
		if (errWhole == nil) != (errTaken == nil) || whole != taken {
			t.Fatalf("%s:\nScan     %v %+v\nScanFrom %v %+v", next, errWhole, whole, errTaken, taken)
		}
	}
	if r.Resumes([]byte(`{"id":"chatcmpl-2"`+chunk[len(`{"id":"chatcmpl-1"`):]), prefix, Answer) {
		t.Fatal("a chunk with another id resumes")
	}
	if r.Resumes([]byte(chunk), prefix, FirstAnswer) {
		t.Fatal("a scan of another mode resumes")
	}
}

// Whatever the first object and whatever follows the bytes it shares with
// the second, ScanNoting is Scan, and ScanFrom finds what Scan finds.
func FuzzResume(f *testing.F) {
	f.Add(chunk, `"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}`, uint8(1))
	f.Add(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`, `"delta":{"type":"text_delta","text":"\n"}}`, uint8(1))
	f.Add(`{"mod\u0065l":"a","Model":"b","messages":[{"role":"user"}],"stream":true}`, `"messages":[],"model":"c"}`, uint8(0))
	f.Add(`{"choices":[{"delta":{"role":"assistant"}}]}`, `"choices":[{"delta":{"content":""}}],"error":null}`, uint8(2))
	f.Add(`{"error":{"message":"x"},"id":"1"}`, `"error":null}`, uint8(2))
	f.Fuzz(func(t *testing.T, a, tail string, m uint8) {
		mode := Mode(m % 3)
		var r Resume
		var noted, plain Fields
		errNoted, errPlain := noted.ScanNoting([]byte(a), mode, &r), plain.Scan([]byte(a), mode)
		if (errNoted == nil) != (errPlain == nil) || noted != plain {
			t.Fatalf("%q: ScanNoting %v %+v, Scan %v %+v", a, errNoted, noted, errPlain, plain)
		}
		if r.At == 0 {
			return
		}
		prefix := []byte(a[:r.At+1])
		b := []byte(a[:r.At] + tail)
		if !r.Resumes(b, prefix, mode) {
			return // tail does not start with the key's quote
		}
		var whole, taken Fields
		errWhole, errTaken := whole.Scan(b, mode), taken.ScanFrom(b, &r)
		if (errWhole == nil) != (errTaken == nil) || whole != taken {
			t.Fatalf("%q after %q:\nScan     %v %+v\nScanFrom %v %+v", b, a, errWhole, whole, errTaken, taken)
		}
	})
}
