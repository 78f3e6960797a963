package translate

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// rqCase is one row of the request table: a body of from translated to to,
// members of the output (dotted paths, array indexes as numbers) with the
// JSON they must hold ("-" for absent), the dropped list's entries that
// must be there, and the member of a *Error when one is wanted.
type rqCase struct {
	name    string
	from    api.API
	to      api.API
	body    string
	want    map[string]string
	dropped []string
	err     string
	opts    RequestOptions
}

func rqRun(t *testing.T, cases []rqCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name+"/"+c.from.String()+"->"+c.to.String(), func(t *testing.T) {
			out, dropped, err := RequestBody(c.from, c.to, []byte(c.body), c.opts)
			if c.err != "" {
				var e *Error
				if !errors.As(err, &e) || e.Member != c.err {
					t.Fatalf("err = %v, want a *Error for %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			var m any
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			for path, want := range c.want {
				if got := rqAt(m, path); got != rqCanonical(want) {
					t.Errorf("%s = %s, want %s\nout: %s", path, got, want, out)
				}
			}
			for _, d := range c.dropped {
				if !slices.Contains(dropped, d) {
					t.Errorf("dropped = %q, want it to hold %q", dropped, d)
				}
			}
		})
	}
}

// rqCanonical is want with its objects' keys in order, as rqAt writes
// them ("-" stays "-").
func rqCanonical(want string) string {
	var v any
	if json.Unmarshal([]byte(want), &v) != nil {
		return want
	}
	b, _ := Marshal(v)
	return string(b)
}

// rqAt is the compact JSON at a dotted path of v, "-" when absent.
func rqAt(v any, path string) string {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return "-"
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return "-"
			}
			v = x[i]
		default:
			return "-"
		}
	}
	b, _ := Marshal(v)
	return string(b)
}

func TestRequestSameAPIIsUnchanged(t *testing.T) {
	body := []byte(`{"model":"m","messages":[] , "x":1}`)
	for _, a := range conversations {
		out, dropped, err := RequestBody(a, a, body, RequestOptions{})
		if err != nil || dropped != nil || string(out) != string(body) {
			t.Errorf("%v: %s %q %v", a, out, dropped, err)
		}
	}
}

func TestRequestNotAnObject(t *testing.T) {
	for _, body := range []string{``, `[]`, `null`, `"x"`, `{"a":`} {
		_, _, err := RequestBody(api.Chat, api.Messages, []byte(body), RequestOptions{})
		var e *Error
		if err == nil || errors.As(err, &e) {
			t.Errorf("%q: err = %v, want a plain error", body, err)
		}
	}
}

func TestRequestSystem(t *testing.T) {
	rqRun(t, []rqCase{
		{name: "system and developer anywhere are hoisted and joined", from: api.Chat, to: api.Messages,
			body: `{"model":"m","messages":[{"role":"system","content":"a"},{"role":"user","content":"hi"},{"role":"developer","content":[{"type":"text","text":"b"}]},{"role":"system","content":""}]}`,
			want: map[string]string{"system": `[{"type":"text","text":"a\n\nb"}]`, "messages.0.role": `"user"`, "messages.1": "-", "model": `"m"`}},
		{name: "no system, no empty block", from: api.Chat, to: api.Messages,
			body: `{"messages":[{"role":"system","content":""},{"role":"user","content":"hi"}]}`,
			want: map[string]string{"system": "-"}},
		{name: "system blocks and Claude Code's role system", from: api.Messages, to: api.Chat,
			body: `{"max_tokens":5,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}],"messages":[{"role":"system","content":"c"},{"role":"user","content":"hi"}]}`,
			want: map[string]string{"messages.0": `{"role":"system","content":"a\n\nb"}`, "messages.1": `{"role":"system","content":"c"}`, "messages.2.content": `"hi"`}},
		{name: "role system in messages hoisted", from: api.Messages, to: api.Responses,
			body: `{"max_tokens":5,"system":"a","messages":[{"role":"system","content":"c"},{"role":"user","content":"hi"}]}`,
			want: map[string]string{"instructions": `"a\n\nc"`, "input.0.role": `"user"`}},
		{name: "instructions and developer items", from: api.Responses, to: api.Messages,
			body: `{"instructions":"a","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"b"}]},{"role":"user","content":"hi"}]}`,
			want: map[string]string{"system": `[{"type":"text","text":"a\n\nb"}]`, "messages.0": `{"role":"user","content":[{"type":"text","text":"hi"}]}`}},
		{name: "instructions", from: api.Responses, to: api.Chat,
			body: `{"instructions":"a","input":"hi"}`,
			want: map[string]string{"messages.0": `{"role":"system","content":"a"}`, "messages.1": `{"role":"user","content":"hi"}`}},
		{name: "leading system is instructions, later ones items", from: api.Chat, to: api.Responses,
			body: `{"messages":[{"role":"system","content":"a"},{"role":"user","content":"hi"},{"role":"system","content":"b"}]}`,
			want: map[string]string{"instructions": `"a"`, "input.1": `{"type":"message","role":"system","content":"b"}`}},
	})
}

func TestRequestTextAndImages(t *testing.T) {
	rqRun(t, []rqCase{
		{name: "data URI and URL images", from: api.Chat, to: api.Messages,
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA="}},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"high"}},{"type":"text","text":""}]},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`,
			want: map[string]string{
				"messages.0.content": `[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA="}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]`,
				"messages.1":         `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`,
				"messages.2.content": `[{"type":"text","text":"more"}]`}},
		{name: "base64 and url sources", from: api.Messages, to: api.Chat,
			body: `{"max_tokens":9,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"QQ=="}},{"type":"image","source":{"type":"url","url":"https://x"}},{"type":"text","text":"what"}]}]}`,
			want: map[string]string{"messages.0.content": `[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,QQ=="}},{"type":"image_url","image_url":{"url":"https://x"}},{"type":"text","text":"what"}]`}},
		{name: "input_image", from: api.Responses, to: api.Chat,
			body: `{"input":[{"role":"user","content":[{"type":"input_text","text":"see"},{"type":"input_image","image_url":"https://x","detail":"low"}]},{"role":"assistant","content":[{"type":"output_text","text":"a cat"}]}]}`,
			want: map[string]string{"messages.0.content.1": `{"type":"image_url","image_url":{"url":"https://x","detail":"low"}}`, "messages.1": `{"role":"assistant","content":"a cat"}`}},
		{name: "image_url to input_image", from: api.Chat, to: api.Responses,
			body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x","detail":"low"}}]},{"role":"assistant","content":"a cat"}]}`,
			want: map[string]string{"input.0.content": `[{"type":"input_image","image_url":"https://x","detail":"low"}]`, "input.1": `{"type":"message","role":"assistant","content":"a cat"}`}},
		{name: "file parts dropped", from: api.Chat, to: api.Messages,
			body:    `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}},{"type":"text","text":"x"}]}]}`,
			dropped: []string{"messages[0].content[0] (file)"}},
		{name: "documents dropped", from: api.Messages, to: api.Chat,
			body:    `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"x"}},{"type":"text","text":"x"}]}]}`,
			dropped: []string{"messages[0].content[0] (document)"}},
	})
}
