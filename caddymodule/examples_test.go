package caddymodule

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// runLine is the command an example's header comment tells users to run:
// its environment assignments and the command itself.
type runLine struct {
	env     []string // NAME=value, as printed
	command string
}

var assignment = regexp.MustCompile(`^([A-Z_][A-Z0-9_]*)=(\S*)$`)

// exampleRunLine finds the line of an example's comment that runs it
// (`… caddy run --config examples/<name>/Caddyfile`, continuation lines
// joined) and splits off its leading NAME=value words.
func exampleRunLine(t *testing.T, file string) runLine {
	t.Helper()
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var joined []string
	var cur string
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if strings.HasSuffix(text, `\`) {
			cur += strings.TrimSpace(strings.TrimSuffix(text, `\`)) + " "
			continue
		}
		joined = append(joined, cur+text)
		cur = ""
	}
	want := "run --config examples/" + exampleName(file) + "/Caddyfile"
	for _, l := range joined {
		if !strings.Contains(l, want) {
			continue
		}
		var rl runLine
		words := strings.Fields(l)
		for len(words) > 0 && assignment.MatchString(words[0]) {
			rl.env = append(rl.env, words[0])
			words = words[1:]
		}
		rl.command = strings.Join(words, " ")
		return rl
	}
	t.Fatalf("%s: no comment line runs it (%q)", file, want)
	return runLine{}
}

// exampleEnv is the environment an example's run line gives Caddy: this
// process's, without any variable the Caddyfile reads, plus the run line's
// assignments (minus those named in drop).
func exampleEnv(t *testing.T, file string, rl runLine, drop ...string) []string {
	t.Helper()
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{(?:env\.|\$)([A-Za-z0-9_]+)`).FindAllStringSubmatch(string(body), -1) {
		read[m[1]] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !read[name] {
			env = append(env, kv)
		}
	}
next:
	for _, kv := range rl.env {
		for _, d := range drop {
			if strings.HasPrefix(kv, d+"=") {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// setRunLineEnv sets the run line's variables for an in-process adapt.
func setRunLineEnv(t *testing.T, file string) {
	t.Helper()
	for _, kv := range exampleRunLine(t, file).env {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
}

// Every example loads with the environment its run line sets, through the
// real binary (`caddy validate` loads a config as `caddy run` does, without
// serving it, so no example's ports are taken) (the llama-cpp
// example needed GATEWAY_KEYS and its run line did not set it).
func TestExampleRunLinesLoadAsPrinted(t *testing.T) {
	caddy := caddyBinary(t)
	for name, file := range examples(t) {
		t.Run(name, func(t *testing.T) {
			rl := exampleRunLine(t, file)
			// one form, the binary ./build.sh writes; the quickstart is
			// the README's first command, which runs before any build
			//
			form := "./caddy run "
			if name == "quickstart" {
				form = "go run ./cmd/caddy run "
			}
			if !strings.HasPrefix(rl.command, form) {
				t.Fatalf("the run line runs %q, not %q…", rl.command, form)
			}
			args := strings.Fields(rl.command[strings.Index(rl.command, " run ")+len(" run "):])
			cmd := exec.Command(caddy, append([]string{"validate"}, args...)...)
			cmd.Dir = ".."
			cmd.Env = exampleEnv(t, file, rl)
			if out, code := exitCode(t, cmd); code != 0 {
				t.Fatalf("%s with %v: exit %d\n%s", rl.command, rl.env, code, out)
			}
		})
	}
}

// A variable the config needs and the environment lacks is named, with the
// Caddyfile line that uses it.
func TestEmptyEnvironmentVariableIsNamedWithItsLine(t *testing.T) {
	caddy := caddyBinary(t)
	file := filepath.Join("..", "examples", "llama-cpp", "Caddyfile")
	rl := exampleRunLine(t, file)
	for _, tc := range []struct{ drop, want string }{
		{"GATEWAY_KEYS", "{env.GATEWAY_KEYS} is empty: set GATEWAY_KEYS"},
		{"LLAMA_SERVER", "{env.LLAMA_SERVER} is empty: set LLAMA_SERVER"},
	} {
		cmd := exec.Command(caddy, "validate", "--config", "examples/llama-cpp/Caddyfile")
		cmd.Dir = ".."
		cmd.Env = exampleEnv(t, file, rl, tc.drop)
		out, code := exitCode(t, cmd)
		line := lineOf(t, file, "{env."+tc.drop+"}")
		if code == 0 || !strings.Contains(out, tc.want) || !strings.Contains(out, "examples/llama-cpp/Caddyfile:"+line) {
			t.Errorf("without %s: exit %d, want an error naming it and Caddyfile:%s\n%s", tc.drop, code, line, out)
		}
	}
}

// lineOf is the number of the first line of file that contains s, as text.
func lineOf(t *testing.T, file, s string) string {
	t.Helper()
	for i, l := range strings.Split(readFile(t, file), "\n") {
		if strings.Contains(l, s) && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			return strconv.Itoa(i + 1)
		}
	}
	t.Fatalf("%s has no %s", file, s)
	return ""
}

// `caddy validate` of examples/public creates its access
// log. That is Caddy's file log writer, opened while the config is
// provisioned, with or without the gateway; the gateway writes nothing when
// validated. The example and the README say so.
func TestValidatingThePublicExampleCreatesOnlyCaddysAccessLog(t *testing.T) {
	caddy := caddyBinary(t)
	file := filepath.Join("..", "examples", "public", "Caddyfile")
	rl := exampleRunLine(t, file)
	const logPath = "/var/log/caddy/llm-access.log"
	example := readFile(t, file)
	if !strings.Contains(example, logPath) {
		t.Fatalf("the example no longer logs to %s", logPath)
	}
	logBlock := example[strings.Index(example, "\tlog {"):]
	logBlock = logBlock[:strings.Index(logBlock, "\n\t}\n")+len("\n\t}\n")]

	// validate rewrites nothing but the files it creates, under dir
	validate := func(name, config string) []string {
		t.Helper()
		dir := t.TempDir()
		config = strings.ReplaceAll(config, logPath, filepath.Join(dir, "logs", "llm-access.log"))
		cfg := filepath.Join(t.TempDir(), "Caddyfile")
		if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(caddy, "validate", "--adapter", "caddyfile", "--config", cfg)
		cmd.Env = append(exampleEnv(t, file, rl), "HOME="+filepath.Join(dir, "home"),
			"XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
		if out, code := exitCode(t, cmd); code != 0 {
			t.Fatalf("%s: exit %d\n%s", name, code, out)
		}
		var created []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				created = append(created, rel)
			}
			return nil
		})
		return created
	}
	want := fmt.Sprint([]string{filepath.Join("logs", "llm-access.log")})
	if got := validate("the example", example); fmt.Sprint(got) != want {
		t.Fatalf("validating the example created %v, want only the access log", got)
	}
	if got := validate("the example without its log", strings.Replace(example, logBlock, "", 1)); len(got) != 0 {
		t.Fatalf("validating the example without its log block created %v: the gateway wrote something", got)
	}
	plain := "{\n\tadmin off\n}\nhttp://localhost:1 {\n" + logBlock + "\trespond ok\n}\n"
	if got := validate("the log block alone", plain); fmt.Sprint(got) != want {
		t.Fatalf("validating Caddy's log block alone created %v", got)
	}

	// said where a user of the example reads it
	for f, says := range map[string]string{
		file:                             "so `caddy validate` creates it too: that is Caddy's log writer",
		filepath.Join("..", "README.md"): "`caddy validate` of this example creates `/var/log/caddy/llm-access.log`",
	} {
		text := strings.Join(strings.Fields(strings.ReplaceAll(readFile(t, f), "\t# ", "")), " ")
		if !strings.Contains(text, says) {
			t.Errorf("%s does not say %q", f, says)
		}
	}
}
