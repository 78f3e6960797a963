package translate_test

import (
	"errors"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func TestRequestSameAPIIsUnchanged(t *testing.T) {
	body := []byte(`{"model":"m","messages":[] , "x":1}`)
	for _, a := range translatetest.Clients {
		out, dropped, err := translate.RequestBody(a, a, body, translate.RequestOptions{})
		if err != nil || dropped != nil || string(out) != string(body) {
			t.Errorf("%v: %s %q %v", a, out, dropped, err)
		}
	}
}

func TestRequestNotAnObject(t *testing.T) {
	for _, body := range []string{``, `[]`, `null`, `"x"`, `{"a":`} {
		_, _, err := translate.RequestBody(api.Chat, api.Messages, []byte(body), translate.RequestOptions{})
		var e *translate.Error
		if err == nil || errors.As(err, &e) {
			t.Errorf("%q: err = %v, want a plain error", body, err)
		}
	}
}

func TestRequestSystem(t *testing.T) {
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "system and developer anywhere are hoisted and joined", From: api.Chat, To: api.Messages,
			Body: `{"model":"m","messages":[{"role":"system","content":"a"},{"role":"user","content":"hi"},{"role":"developer","content":[{"type":"text","text":"b"}]},{"role":"system","content":""}]}`,
			Want: map[string]string{"system": `[{"type":"text","text":"a\n\nb"}]`, "messages.0.role": `"user"`, "messages.1": "-", "model": `"m"`}},
		{Name: "no system, no empty block", From: api.Chat, To: api.Messages,
			Body: `{"messages":[{"role":"system","content":""},{"role":"user","content":"hi"}]}`,
			Want: map[string]string{"system": "-"}},
		{Name: "system blocks and Claude Code's role system", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":5,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}],"messages":[{"role":"system","content":"c"},{"role":"user","content":"hi"}]}`,
			Want: map[string]string{"messages.0": `{"role":"system","content":"a\n\nb"}`, "messages.1": `{"role":"system","content":"c"}`, "messages.2.content": `"hi"`}},
		{Name: "role system in messages hoisted", From: api.Messages, To: api.Responses,
			Body: `{"max_tokens":5,"system":"a","messages":[{"role":"system","content":"c"},{"role":"user","content":"hi"}]}`,
			Want: map[string]string{"instructions": `"a\n\nc"`, "input.0.role": `"user"`}},
		{Name: "instructions and developer items", From: api.Responses, To: api.Messages,
			Body: `{"instructions":"a","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"b"}]},{"role":"user","content":"hi"}]}`,
			Want: map[string]string{"system": `[{"type":"text","text":"a\n\nb"}]`, "messages.0": `{"role":"user","content":[{"type":"text","text":"hi"}]}`}},
		{Name: "instructions", From: api.Responses, To: api.Chat,
			Body: `{"instructions":"a","input":"hi"}`,
			Want: map[string]string{"messages.0": `{"role":"system","content":"a"}`, "messages.1": `{"role":"user","content":"hi"}`}},
		{Name: "leading system is instructions, later ones items", From: api.Chat, To: api.Responses,
			Body: `{"messages":[{"role":"system","content":"a"},{"role":"user","content":"hi"},{"role":"system","content":"b"}]}`,
			Want: map[string]string{"instructions": `"a"`, "input.1": `{"type":"message","role":"system","content":"b"}`}},
	})
}

func TestRequestTextAndImages(t *testing.T) {
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "data URI and URL images", From: api.Chat, To: api.Messages,
			Body: `{"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA="}},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"high"}},{"type":"text","text":""}]},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`,
			Want: map[string]string{
				"messages.0.content": `[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA="}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]`,
				"messages.1":         `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`,
				"messages.2.content": `[{"type":"text","text":"more"}]`}},
		{Name: "base64 and url sources", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":9,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"QQ=="}},{"type":"image","source":{"type":"url","url":"https://x"}},{"type":"text","text":"what"}]}]}`,
			Want: map[string]string{"messages.0.content": `[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,QQ=="}},{"type":"image_url","image_url":{"url":"https://x"}},{"type":"text","text":"what"}]`}},
		{Name: "input_image", From: api.Responses, To: api.Chat,
			Body: `{"input":[{"role":"user","content":[{"type":"input_text","text":"see"},{"type":"input_image","image_url":"https://x","detail":"low"}]},{"role":"assistant","content":[{"type":"output_text","text":"a cat"}]}]}`,
			Want: map[string]string{"messages.0.content.1": `{"type":"image_url","image_url":{"url":"https://x","detail":"low"}}`, "messages.1": `{"role":"assistant","content":"a cat"}`}},
		{Name: "image_url to input_image", From: api.Chat, To: api.Responses,
			Body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x","detail":"low"}}]},{"role":"assistant","content":"a cat"}]}`,
			Want: map[string]string{"input.0.content": `[{"type":"input_image","image_url":"https://x","detail":"low"}]`, "input.1": `{"type":"message","role":"assistant","content":"a cat"}`}},
		{Name: "file parts dropped", From: api.Chat, To: api.Messages,
			Body:    `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}},{"type":"text","text":"x"}]}]}`,
			Dropped: []string{"messages[0].content[0] (file)"}},
		{Name: "documents dropped", From: api.Messages, To: api.Chat,
			Body:    `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"x"}},{"type":"text","text":"x"}]}]}`,
			Dropped: []string{"messages[0].content[0] (document)"}},
	})
}
