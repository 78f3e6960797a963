package caddyfile

import (
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// A GPU's "24 GB" is 24 GiB: every unit of a memory size is binary, so a
// memory_budget 24GB holds two engines of memory 12GiB, as it reads.
func TestMemorySizesAreBinaryWhateverTheUnit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"24GiB", 24 << 30}, {"24GB", 24 << 30}, {"24G", 24 << 30}, {"24gb", 24 << 30}, {"24Gi", 24 << 30},
		{"1.5GiB", 3 << 29}, {"512MB", 512 << 20}, {"512MiB", 512 << 20}, {"1T", 1 << 40},
		{"4096", 4096}, {"4096B", 4096}, {"12 GiB", 12 << 30},
	} {
		if got, ok := ParseMemorySize(tc.in); !ok || got != tc.want {
			t.Errorf("%q: %d %v, want %d", tc.in, got, ok, tc.want)
		}
	}
	for _, bad := range []string{"", "0", "0GiB", "GiB", "12 parsecs", "-1GiB", "1e3G", "1.2.3G", "99999999T"} {
		if n, ok := ParseMemorySize(bad); ok {
			t.Errorf("%q read as %d", bad, n)
		}
	}

	cfg := parse(t, `llm_gateway {
	memory_budget 24GB
	engine a {
		cmd serve --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models a
		memory 12GiB
	}
	engine b {
		cmd serve --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models b
		memory 12G
	}
}`)
	if cfg.MemoryBudget != 24<<30 || cfg.Engines[0].Memory+cfg.Engines[1].Memory != cfg.MemoryBudget {
		t.Fatalf("budget %d, engines %d and %d", cfg.MemoryBudget, cfg.Engines[0].Memory, cfg.Engines[1].Memory)
	}
	_, err := Parse(cf.NewTestDispenser(`llm_gateway {
	engine a {
		cmd serve --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models a
		memory 12 parsecs
	}
}`))
	if err == nil || err.Error() != "wrong argument count or unexpected line ending after '12', at Testfile:6" {
		t.Errorf("%v", err)
	}
	_, err = Parse(cf.NewTestDispenser(`llm_gateway {
	memory_budget 24GX` + remote + `
}`))
	if want := `memory_budget takes a size such as 20GiB (units are binary: 20GB is 20GiB, as on a GPU), not "24GX", at Testfile:2`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
