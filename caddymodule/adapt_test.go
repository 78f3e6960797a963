package caddymodule

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // registers the caddyfile adapter
)

var updateGoldens = flag.Bool("update", false, "rewrite testdata/adapt/*.json from examples/*/Caddyfile")

// examples are the Caddyfiles shipped in examples/, by example name: the
// directory under examples/ ("fleet", and "fleet/node" for an example made
// of several Caddyfiles).
func examples(t *testing.T) map[string]string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*/Caddyfile", "*/*/Caddyfile"} {
		found, err := filepath.Glob(filepath.Join("..", "examples", pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		t.Fatal("no examples/*/Caddyfile")
	}
	byName := map[string]string{}
	for _, f := range files {
		byName[exampleName(f)] = f
	}
	return byName
}

// exampleName is an example Caddyfile's directory under examples/.
func exampleName(file string) string {
	rel, _ := filepath.Rel(filepath.Join("..", "examples"), filepath.Dir(file))
	return filepath.ToSlash(rel)
}

// adapt turns a Caddyfile into indented JSON config, as `caddy adapt` does,
// and fails on any warning.
func adapt(t *testing.T, file string) []byte {
	t.Helper()
	setRunLineEnv(t, file)
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(body, map[string]any{"filename": file})
	if err != nil {
		t.Fatalf("adapting %s: %v", file, err)
	}
	for _, w := range warnings {
		t.Errorf("adapting %s: warning: %s", file, w.String())
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, out, "", "\t"); err != nil {
		t.Fatal(err)
	}
	indented.WriteByte('\n')
	return indented.Bytes()
}

func TestExamplesAdaptToTheirGoldenJSON(t *testing.T) {
	for name, file := range examples(t) {
		t.Run(name, func(t *testing.T) {
			got := adapt(t, file)
			golden := filepath.Join("testdata", "adapt", name+".json")
			if *updateGoldens {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestExamplesAdaptToTheirGoldenJSON -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s adapts to\n%s\nwant (%s)\n%s\n(go test -update rewrites the golden file)", file, got, golden, want)
			}
		})
	}
}

// TestAdaptedHandlerRoundTripsThroughGateway proves the module's JSON loses
// nothing: every llm_gateway handler the adapter writes, read into a Gateway
// and written back, is the same JSON.
func TestAdaptedHandlerRoundTripsThroughGateway(t *testing.T) {
	for name, file := range examples(t) {
		t.Run(name, func(t *testing.T) {
			handlers := findHandlers(decodeJSON(t, adapt(t, file)), "llm_gateway")
			if len(handlers) == 0 {
				t.Fatalf("%s adapts to no llm_gateway handler", file)
			}
			for _, h := range handlers {
				delete(h, "handler") // the module's name, which Caddy adds
				original, err := json.Marshal(h)
				if err != nil {
					t.Fatal(err)
				}
				var g Gateway
				dec := json.NewDecoder(bytes.NewReader(original))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&g); err != nil {
					t.Fatalf("reading the handler into a Gateway: %v\n%s", err, original)
				}
				again, err := json.Marshal(&g)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(decodeJSON(t, again), any(h)) {
					t.Errorf("the handler changed on the round trip:\n%s\nbecame\n%s", original, again)
				}
			}
		})
	}
}

// decodeJSON decodes b generically, numbers kept as written.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return v
}

// findHandlers returns every object in v whose "handler" is name, however
// deep the routes that hold it are nested.
func findHandlers(v any, name string) []map[string]any {
	var found []map[string]any
	switch v := v.(type) {
	case map[string]any:
		if v["handler"] == name {
			return append(found, v)
		}
		for _, child := range v {
			found = append(found, findHandlers(child, name)...)
		}
	case []any:
		for _, child := range v {
			found = append(found, findHandlers(child, name)...)
		}
	}
	return found
}

// llama-swap's ${PORT} and Caddy's {port} (which the adapter turns into
// {http.request.port} before the directive sees it) would reach the engine
// as written: `caddy adapt` refuses them at their line, saying to write
// {engine.port}.
func TestForeignPortPlaceholdersAreRefusedAtTheirLine(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"${PORT}", "${PORT} is llama-swap's placeholder and nothing fills it in here: write {engine.port}"},
		{"{port}", "{http.request.port} is the port of the request to Caddy, not the engine's: write {engine.port}"},
	} {
		body := ":" + freePort(t) + " {\n\tllm_gateway {\n\t\tengine qwen {\n\t\t\tcmd llama-server --port " + tc.value +
			"\n\t\t\tto http://127.0.0.1:{engine.port}\n\t\t\tmodels qwen\n\t\t}\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(body), map[string]any{"filename": "Caddyfile"})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Caddyfile:4") {
			t.Errorf("cmd with %s: got %v\nwant %q at Caddyfile:4", tc.value, err, tc.want)
		}
	}
}
