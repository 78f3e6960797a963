package caddyllmgateway

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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

// ciScripts is the text of every CI script.
func ciScripts(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(".ci/*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
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
	code := regexp.MustCompile(`(?:errBadRequest\(|\btype[A-Z][A-Za-z]*, )"([a-z_]+)"`)
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
