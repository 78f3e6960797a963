package tokencount

import (
	"encoding/json"
	"strings"
	"testing"
)

const chat = `{"model":"m","messages":[{"role":"system","content":"You are terse."},
{"role":"user","content":[{"type":"text","text":"Weather in Paris?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
{"role":"tool","tool_call_id":"c1","content":"18 degrees"}],
"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather","parameters":{"type":"object"}}}]}`

func TestReadKeepsWhatATemplateIsGiven(t *testing.T) {
	p, err := Read([]byte(chat))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"You are terse.", "Weather in Paris?", `get_weather {"city":"Paris"}`, "18 degrees",
		`{"name":"get_weather","description":"The weather","parameters":{"type":"object"}}`, "system\n", "tool\n"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("the text lacks %q:\n%s", want, p.Text)
		}
	}
	if strings.Contains(p.Text, "AAAA") || p.Messages != 4 {
		t.Fatalf("%d messages, text %q", p.Messages, p.Text)
	}
	if got, want := p.Estimate(), (len(p.Text)+3)/4+4*4+3; got != want {
		t.Fatalf("estimate %d, want %d", got, want)
	}
}

func TestTokenizeBodyIsReadByBothTokenizers(t *testing.T) {
	p, _ := Read([]byte(chat))
	var b struct {
		Model               string            `json:"model"`
		Messages            []json.RawMessage `json:"messages"` // vLLM's TokenizeChatRequest
		Tools               []json.RawMessage `json:"tools"`
		AddGenerationPrompt bool              `json:"add_generation_prompt"`
		Content             string            `json:"content"` // llama-server's /tokenize
	}
	if err := json.Unmarshal(TokenizeBody("qwen", []byte(chat), p), &b); err != nil {
		t.Fatal(err)
	}
	if b.Model != "qwen" || len(b.Messages) != 4 || len(b.Tools) != 1 || !b.AddGenerationPrompt || b.Content != p.Text {
		t.Fatalf("%+v", b)
	}
}

// The engines' answers, as their sources write them.
func TestTokenizedReadsTheEnginesAnswers(t *testing.T) {
	for _, c := range []struct {
		name, body string
		n          int
		ok         bool
	}{
		{"llama-server", `{"tokens":[1,15043,2787,29991]}`, 4, true},
		{"llama-server with_pieces", `{"tokens":[{"id":1,"piece":"<s>"},{"id":15043,"piece":[226,150]}]}`, 2, true},
		{"llama-server, no content", `{"tokens":[]}`, 0, true},
		{"vLLM", `{"count":5,"max_model_len":32768,"tokens":[1,2,3,4,5],"token_strs":null}`, 5, true},
		{"not an answer", `{"error":"x"}`, 0, false},
		{"not JSON", `File Not Found`, 0, false},
		{"a count that is not one", `{"count":"5"}`, 0, false},
	} {
		n, ok := Tokenized([]byte(c.body))
		if n != c.n || ok != c.ok {
			t.Errorf("%s: %d %v, want %d %v", c.name, n, ok, c.n, c.ok)
		}
	}
}

func FuzzTokenized(f *testing.F) {
	f.Add([]byte(`{"tokens":[1,2,3]}`))
	f.Add([]byte(`{"count":5,"tokens":[1,2,3,4,5]}`))
	f.Add([]byte(`{"tokens":[{"id":1,"piece":"a"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, ok := Tokenized(body)
		if !ok {
			return
		}
		var doc struct {
			Count  *json.Number       `json:"count"`
			Tokens *[]json.RawMessage `json:"tokens"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return // a member of another type: encoding/json is stricter
		}
		if doc.Count == nil && doc.Tokens != nil && len(*doc.Tokens) != n {
			t.Fatalf("%d tokens counted, encoding/json reads %d: %s", n, len(*doc.Tokens), body)
		}
	})
}
