package caddyllmgateway

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// fence is one fenced code block of a Markdown file.
type fence struct {
	lang  string
	lines []string
}

func fences(t *testing.T, file string) []fence {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []fence
	var cur *fence
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &fence{lang: strings.TrimPrefix(line, "```")}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	return out
}

// ciScripts is the text of every CI script (files of .ci/, not its
// directories: .ci/structure is a Go program).
func ciScripts(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(".ci/*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if info, err := os.Stat(f); err != nil || info.IsDir() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
	}
	return out
}

// Every shell command the README prints is run by CI exactly as printed, and
// every client snippet is run by .ci/readme.sh, which takes them from the
// README itself (issue 18).
func TestREADMECommandsAreRunByCI(t *testing.T) {
	scripts := ciScripts(t)
	snippets := map[string]int{}
	for _, f := range fences(t, "README.md") {
		switch f.lang {
		case "sh":
			for _, cmd := range commands(f.lines) {
				found := false
				for _, text := range scripts {
					if strings.Contains(text, "\n"+cmd+"\n") {
						found = true
					}
				}
				if !found {
					t.Errorf("no CI script runs the README's command as printed:\n%s", cmd)
				}
			}
		case "python", "javascript", "go":
			snippets[f.lang]++
		case "caddyfile", "json", "text":
			// configuration, bodies and diagrams, not commands
		default:
			t.Errorf("the README has a %q block: add it to this test (run it in CI, or say why it is not a command)", f.lang)
		}
	}
	for _, lang := range []string{"python", "javascript", "go"} {
		if snippets[lang] != 1 {
			t.Errorf("the README has %d %s snippets; .ci/readme.sh runs exactly one", snippets[lang], lang)
		}
		if !strings.Contains(scripts[".ci/readme.sh"], "block "+lang+" >") {
			t.Errorf(".ci/readme.sh does not run the README's %s snippet", lang)
		}
	}
}

// commands splits a shell block into its commands, a command's continuation
// lines (after a trailing backslash) kept with it, comments and blank lines
// left out.
func commands(lines []string) []string {
	var out []string
	var cur []string
	for _, l := range lines {
		if len(cur) == 0 && (strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#")) {
			continue
		}
		cur = append(cur, l)
		if !strings.HasSuffix(l, `\`) {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	return out
}

// The README's error table lists every code the gateway answers with.
func TestREADMEErrorTableListsEveryCode(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := filepath.Glob("handler/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, sub...)
	code := regexp.MustCompile(`(?:BadRequest\(|\bCode: |\bType[A-Z][A-Za-z]*, )"([a-z_]+)"`)
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || !(strings.HasPrefix(f, "handler/") || strings.HasPrefix(f, "caddymodule/")) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range code.FindAllSubmatch(b, -1) {
			seen[string(m[1])] = true
		}
	}
	if len(seen) < 10 {
		t.Fatalf("found only %d error codes in the code: is the pattern stale?", len(seen))
	}
	for c := range seen {
		if !strings.Contains(string(readme), "`"+c+"`") {
			t.Errorf("the README's error table lacks %s", c)
		}
	}
}

// The CHANGELOG is for users upgrading: a few lines under its title, an
// Unreleased section, then versions with dates, each sorted into Added, Changed and Fixed, one line per change,
// and no bare issue numbers (a reader of the CHANGELOG has no issue tracker).
func TestChangelogHasDatedVersionsOneLinePerChange(t *testing.T) {
	b, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`^## (?:Unreleased|v\d+\.\d+\.\d+ — \d{4}-\d{2}-\d{2})$`)
	kind := regexp.MustCompile(`^### (?:Added|Changed|Fixed)$`)
	issue := regexp.MustCompile(`(?i)\bissues? \d+`)
	versions, section, intro := 0, "", true
	for i, line := range strings.Split(string(b), "\n") {
		at := fmt.Sprintf("CHANGELOG.md:%d", i+1)
		switch {
		case i == 0:
			if line != "# Changelog" {
				t.Errorf("%s: want the title # Changelog", at)
			}
		case strings.HasPrefix(line, "## "):
			intro = false
			if !version.MatchString(line) {
				t.Errorf("%s: %q is not \"## Unreleased\" or \"## vX.Y.Z — YYYY-MM-DD\"", at, line)
			}
			if line != "## Unreleased" {
				versions++
			}
			section = ""
		case strings.HasPrefix(line, "### "):
			if !kind.MatchString(line) {
				t.Errorf("%s: %q: a change is Added, Changed or Fixed", at, line)
			}
			section = line
		case strings.TrimSpace(line) == "", intro:
			// a blank line, or the few lines under the title
		case strings.HasPrefix(line, "- "):
			if section == "" {
				t.Errorf("%s: a change outside Added, Changed or Fixed", at)
			}
			if issue.MatchString(line) {
				t.Errorf("%s: a bare issue number: link it or drop it", at)
			}
		default:
			t.Errorf("%s: one line per change: %q continues a change or stands alone", at, line)
		}
	}
	if versions == 0 {
		t.Error("the CHANGELOG has no dated version")
	}
}

// caddyInvocation is a command line that runs Caddy: `./caddy run`,
// `caddy llm-probe`, `go run ./cmd/caddy run`, … with a config.
var caddyInvocation = regexp.MustCompile("(?:go run \\./cmd/caddy|[\\w./-]*caddy) (?:run|llm-probe|validate|adapt) --config \\S+")

// Every run line, in the README, the docs and the examples, runs the binary
// the README's build step writes, `./caddy`: a `caddy` on PATH is not what
// ./build.sh makes. The one exception is the README's first command, which
// runs before any build (issue 28).
func TestRunLinesUseTheBinaryTheBuildWrites(t *testing.T) {
	const quickstart = "go run ./cmd/caddy run --config examples/quickstart/Caddyfile"
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "examples/*/Caddyfile", "examples/*/*/Caddyfile"} {
		found, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, found...)
	}
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range caddyInvocation.FindAllString(string(b), -1) {
			seen++
			if cmd != quickstart && !strings.HasPrefix(cmd, "./caddy ") {
				t.Errorf("%s runs %q: write ./caddy (what ./build.sh writes)", f, cmd)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d run lines: is the pattern stale?", seen)
	}
}

// The quick test subsets the README and docs name are packages with tests,
// and the text around the README's first command says what a cold cache
// costs, where a person reads it (issue 28).
func TestREADMESaysWhatTheFirstRunCostsAndAQuickSubset(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	top, _, _ := strings.Cut(string(readme), "## Try it")
	for _, want := range []string{"go run ./cmd/caddy run --config examples/quickstart/Caddyfile", "prints nothing for minutes", "go test ./handler/ ./engines/ ./caddyfile/"} {
		if !strings.Contains(top, want) {
			t.Errorf("the README's opening lacks %q", want)
		}
	}
	dev, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	subset := regexp.MustCompile("`go test ((?:\\./\\w+/ ?)+)`")
	n := 0
	for _, text := range []string{top, string(dev)} {
		for _, m := range subset.FindAllStringSubmatch(text, -1) {
			for _, pkg := range strings.Fields(m[1]) {
				n++
				tests, _ := filepath.Glob(filepath.Join(pkg, "*_test.go"))
				if len(tests) == 0 {
					t.Errorf("the quick subset names %s, which has no tests", pkg)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no quick test subset is named")
	}
}

// docs/llama-swap.md holds a real llama-swap config and its translation,
// which is examples/llama-swap/translated/Caddyfile as printed (the
// caddymodule tests adapt and validate that file), and says how long a key
// must be and how to make one (issue 28).
func TestLlamaSwapPageHoldsTheTranslationTheTestsLoad(t *testing.T) {
	const page, example = "docs/llama-swap.md", "examples/llama-swap/translated/Caddyfile"
	want, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	var yaml, translated bool
	for _, f := range fences(t, page) {
		text := strings.Join(f.lines, "\n")
		switch f.lang {
		case "caddyfile":
			translated = translated || text == strings.TrimRight(string(want), "\n")
		case "yaml":
			yaml = true
			for _, key := range []string{"macros:", "groups:", "aliases:", "filters:", "cmdStop:", "docker run", "preload:", "${PORT}", "${MODEL_ID}"} {
				if !strings.Contains(text, key) {
					t.Errorf("the llama-swap config lacks %s", key)
				}
			}
			if n := strings.Count(text, "\n    cmd:"); n != 5 {
				t.Errorf("the llama-swap config has %d models, want 5", n)
			}
		}
	}
	if !yaml || !translated {
		t.Fatalf("%s: a llama-swap config %v, %s as printed %v", page, yaml, example, translated)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprintf("shorter than %d characters", hconfig.MinKeyLength), "openssl rand -hex 24", "{args[1:]}", "memory budget"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("%s does not say %q", page, s)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	top, _, _ := strings.Cut(string(readme), "```")
	if !strings.Contains(top, "(docs/llama-swap.md)") {
		t.Error("the README's opening does not link docs/llama-swap.md")
	}
}
