package caddyllmgateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The image's run line publishes the keyless quickstart on the host's
// loopback only, and the image says whether it is up.
func TestDockerfileRunLineIsLoopbackAndTheImageHasAHealthCheck(t *testing.T) {
	b, err := os.ReadFile("xcaddy.Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	if !strings.Contains(df, "docker run --rm -p 127.0.0.1:8080:8080 caddy-llm-gateway") {
		t.Error("the Dockerfile's run line does not publish on 127.0.0.1")
	}
	if strings.Contains(df, "docker run --rm -p 8080:8080") {
		t.Error("the Dockerfile still prints a run line that publishes on every host interface")
	}
	if !strings.Contains(df, "\nHEALTHCHECK ") {
		t.Error("the image has no HEALTHCHECK")
	}
}

// .dockerignore keeps the binary a local build wrote and .git out of the
// build context, and no file the build needs (every tracked file but the
// ignore file's own targets).
func TestDockerignoreKeepsEverySourceFile(t *testing.T) {
	b, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, strings.TrimPrefix(l, "/"))
		}
	}
	ignored := func(path string) bool {
		// a pattern matches the path or one of its parent directories,
		// as Docker's do
		for p := path; p != "."; p = filepath.Dir(p) {
			for _, pat := range patterns {
				if ok, _ := filepath.Match(pat, p); ok {
					return true
				}
				if ok, _ := filepath.Match(pat, filepath.Base(p)); ok && !strings.Contains(pat, "/") && strings.HasPrefix(pat, "*") {
					return true
				}
			}
		}
		return false
	}
	for _, want := range []string{"caddy", ".git", "caddy.test"} {
		if !ignored(want) {
			t.Errorf(".dockerignore sends %s to the build", want)
		}
	}
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Skipf("no git here to list the tracked files: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if ignored(f) {
			t.Errorf(".dockerignore leaves out %s, which the build may need", f)
		}
	}
}
