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

// fence is one fenced code block of a Markdown file, its lines without the
// fence's own indentation (a block inside a list item is indented).
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
	indent := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			indent = line[:len(line)-len(trimmed)]
			cur = &fence{lang: strings.TrimPrefix(trimmed, "```")}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, strings.TrimPrefix(line, indent))
		}
	}
	return out
}

// pages is every page of the manual: the README and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, docs...)
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

// Every shell command the README and the docs print is run by CI exactly as
// printed (.ci/readme.sh the README's, .ci/docs.sh the docs'), and every
// client snippet of the README is run by .ci/readme.sh, which takes them from
// the README itself.
func TestEveryPrintedCommandIsRunByCI(t *testing.T) {
	scripts := ciScripts(t)
	snippets := map[string]int{}
	for _, page := range pages(t) {
		for _, f := range fences(t, page) {
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
						t.Errorf("%s: no CI script runs this command as printed (add it to .ci/docs.sh):\n%s", page, cmd)
					}
				}
			case "python", "javascript", "go":
				if page != "README.md" {
					t.Errorf("%s has a %s snippet: only the README's snippets are run (.ci/readme.sh)", page, f.lang)
				}
				snippets[f.lang]++
			case "caddyfile", "json", "text", "yaml", "toml", "":
				// configuration, bodies and diagrams, not commands
			default:
				t.Errorf("%s has a %q block: add it to this test (run it in CI, or say why it is not a command)", page, f.lang)
			}
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
	if !strings.Contains(scripts[".ci/readme.sh"], "\n.ci/docs.sh\n") {
		t.Error(".ci/readme.sh does not run .ci/docs.sh, the docs' commands")
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

// docs/errors.md's table lists every code the gateway answers with.
func TestErrorPageListsEveryCode(t *testing.T) {
	page, err := os.ReadFile("docs/errors.md")
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
		if !strings.Contains(string(page), "`"+c+"`") {
			t.Errorf("docs/errors.md's error table lacks %s", c)
		}
	}
}

// The README is a map: what the gateway is, the two commands, one Caddyfile
// and links, at most 400 lines; the manual is in docs/, and the README links
// every page of it.
func TestREADMEIsAMapOfTheDocs(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 400 {
		t.Errorf("the README has %d lines, more than 400: move the reference to a page in docs/", n)
	}
	if n := len(fences(t, "README.md")); n > 12 {
		t.Errorf("the README has %d code blocks: more than its commands, snippets and one Caddyfile", n)
	}
	for _, page := range pages(t)[1:] {
		if !strings.Contains(string(readme), "("+page+")") {
			t.Errorf("the README does not link %s", page)
		}
	}
}

// mdLink is an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// Every relative link of the README and the docs reaches a file that exists,
// and every #anchor a heading of the page it names, as GitHub makes anchors
// of headings: a moved section leaves no link behind that lands on the top of
// a page or nowhere.
func TestDocsLinksResolve(t *testing.T) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(file string) map[string]bool {
		if a, ok := anchorsOf[file]; ok {
			return a
		}
		a := headingAnchors(t, file)
		anchorsOf[file] = a
		return a
	}
	n := 0
	for _, page := range pages(t) {
		for _, target := range links(t, page) {
			if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue
			}
			n++
			path, anchor, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links %s: no such file", page, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s links %s: an anchor in a file that is not Markdown", page, target)
				continue
			}
			if !anchors(file)[anchor] {
				t.Errorf("%s links %s: %s has no heading with that anchor", page, target, file)
			}
		}
	}
	if n < 50 {
		t.Fatalf("found only %d relative links: is the pattern stale?", n)
	}
}

// links is every link target of a Markdown file outside its code blocks.
func links(t *testing.T, file string) []string {
	t.Helper()
	var out []string
	for _, line := range proseLines(t, file) {
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// proseLines is a Markdown file's lines outside its fenced code blocks.
func proseLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, line)
		}
	}
	return out
}

// headingAnchors is the set of anchors GitHub gives a file's headings: the
// text lower-cased, punctuation but hyphens and underscores dropped, spaces
// turned into hyphens, a repeated anchor numbered (-1, -2, …); and the
// anchors a page sets itself (<a id="t3"></a>, for a row that code links).
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	heading := regexp.MustCompile(`^#{1,6} (.*)$`)
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	explicit := regexp.MustCompile(`<a id="([^"]+)"></a>`)
	out := map[string]bool{}
	for _, line := range proseLines(t, file) {
		for _, m := range explicit.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		base := a
		for i := 1; out[a]; i++ {
			a = fmt.Sprintf("%s-%d", base, i)
		}
		out[a] = true
	}
	return out
}

// Every file the README and the docs name in backticks (`handler/loop.go`,
// `.ci/readme.sh`, `verdict.go`) exists: with a directory, at that path;
// a bare name, somewhere in the repository. A file that moved is renamed in
// the docs with it.
func TestDocsNameFilesThatExist(t *testing.T) {
	named := regexp.MustCompile("`([A-Za-z0-9_./-]+\\.(?:go|sh|md|html|js|css))`")
	base := map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		base[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, page := range pages(t) {
		for _, line := range proseLines(t, page) {
			for _, m := range named.FindAllStringSubmatch(line, -1) {
				f := m[1]
				n++
				if strings.Contains(f, "/") {
					if _, err := os.Stat(f); err != nil {
						t.Errorf("%s names %s: no such file", page, f)
					}
				} else if !base[f] {
					t.Errorf("%s names %s: no file of that name", page, f)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("found only %d file names: is the pattern stale?", n)
	}
}

// docs/development.md's fuzz table names each target beside the package that
// holds it, and every target in the repository is in it.
func TestDevelopmentPageNamesTheFuzzTargets(t *testing.T) {
	row := regexp.MustCompile("^\\| `([a-z0-9/]+)` \\| (.*) \\|$")
	target := regexp.MustCompile("`(Fuzz\\w+)`")
	listed := map[string]string{}
	for _, line := range proseLines(t, "docs/development.md") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, f := range target.FindAllStringSubmatch(m[2], -1) {
			listed[f[1]] = m[1]
		}
	}
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	found := map[string]string{}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = filepath.ToSlash(filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 5 {
		t.Fatalf("found only %d fuzz targets: is the pattern stale?", len(found))
	}
	for name, pkg := range listed {
		if found[name] != pkg {
			t.Errorf("docs/development.md lists %s in %s; it is in %q", name, pkg, found[name])
		}
	}
	for name, pkg := range found {
		if _, ok := listed[name]; !ok {
			t.Errorf("docs/development.md's fuzz table lacks %s (%s)", name, pkg)
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
var caddyInvocation = regexp.MustCompile(`(?:go run \./cmd/caddy|[\w./-]*caddy) (?:run|llm-probe|validate|adapt) --config \S+`)

// Every run line, in the README, the docs and the examples, runs the binary
// the README's build step writes, `./caddy`: a `caddy` on PATH is not what
// ./build.sh makes. The one exception is the README's first command, which
// runs before any build.
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
// costs, where a person reads it.
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
// must be and how to make one.
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
			for _, key := range []string{"macros:", "groups:", "aliases:", "filters:", "cmdStop:", "docker run", "preload:", "${PORT}", "${MODEL_ID}", "swap: false\n    exclusive: true", "metadata:", "description:"} {
				if !strings.Contains(text, key) {
					t.Errorf("the llama-swap config lacks %s", key)
				}
			}
			if n := strings.Count(text, "\n    cmd:"); n != 6 {
				t.Errorf("the llama-swap config has %d models, want 6", n)
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
