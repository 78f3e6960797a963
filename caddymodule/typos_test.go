package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// The directive misspelt, or written among the global options, is refused
// with its line and what was meant.
func TestAMisspeltDirectiveIsRefusedWithWhatWasMeant(t *testing.T) {
	const engine = "\t\tengine a {\n\t\t\tto http://127.0.0.1:1\n\t\t\tmodels a\n\t\t}\n"
	for _, tc := range []struct{ config, want string }{
		{":8080 {\n\tllm-gateway {\n" + engine + "\t}\n}\n", "unrecognized directive llm-gateway (did you mean llm_gateway?), at Caddyfile:2"},
		{":8080 {\n\tllm_gatway {\n" + engine + "\t}\n}\n", "unrecognized directive llm_gatway (did you mean llm_gateway?), at Caddyfile:2"},
		{"{\n\tadmin off\n\tllm_gateway {\n" + engine + "\t}\n}\n", "llm_gateway is a directive of a site, not a global option: write it in a site block such as :8080 { llm_gateway { … } }, at Caddyfile:3"},
	} {
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(tc.config), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}
