package caddyfile

import (
	"encoding/json"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// llama-swap's name, description and metadata, per engine: text joined,
// a metadata value JSON when it reads as JSON, else text.
func TestParseDisplayNameDescriptionAndMetadata(t *testing.T) {
	cfg := parse(t, `llm_gateway {
	engine qwen {
		to http://127.0.0.1:8000
		models qwen
		display_name "Qwen3 30B A3B"
		description General chat, 32k context
		metadata context 32768
		metadata vendor Qwen
		metadata tools true
		metadata langs ["en","fr"]
	}
}`)
	a := cfg.Engines[0].About
	if a == nil || a.DisplayName != "Qwen3 30B A3B" || a.Description != "General chat, 32k context" {
		t.Fatalf("%+v", a)
	}
	got, _ := json.Marshal(a.Metadata)
	if string(got) != `{"context":32768,"langs":["en","fr"],"tools":true,"vendor":"Qwen"}` {
		t.Fatalf("metadata %s", got)
	}
	for _, tc := range []struct{ input, want string }{
		{`llm_gateway {
	engine qwen {
		to http://127.0.0.1:8000
		models qwen
		metadata vendor Qwen
		metadata vendor Alibaba
	}
}`, "metadata vendor is given twice in this block, at Testfile:6"},
		{`llm_gateway {
	engine qwen {
		to http://127.0.0.1:8000
		models qwen
		metadata vendor
	}
}`, "metadata takes a name and a value: metadata context 32768, metadata vendor Qwen (one per line), at Testfile:5"},
		{`llm_gateway {
	engine qwen {
		to http://127.0.0.1:8000
		models qwen
		name "Qwen3"
	}
}`, `unknown engine subdirective "name" in engine qwen (llama-swap's name is display_name here), at Testfile:5`},
		{`llm_gateway {
	engine qwen {
		to http://127.0.0.1:8000
		models qwen
		display_name A
		display_name B
	}
}`, "display_name is set twice in this block (first at Testfile:5), at Testfile:6"},
	} {
		if _, err := Parse(cf.NewTestDispenser(tc.input)); err == nil || err.Error() != tc.want {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}
