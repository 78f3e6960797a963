package caddyllmgateway

import (
	"os"
	"regexp"
	"testing"
)

// The image is built on caddy:<version>-builder and runs on caddy:<version>;
// a Caddy other than go.mod's may not build with this module
// (v2.11.2 did not). go.mod is the one place the version is chosen; the
// Dockerfile's default must follow it.
func TestDockerfilePinsGoModsCaddyVersion(t *testing.T) {
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile("xcaddy.Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^\s*github\.com/caddyserver/caddy/v2 v(\S+)`).FindSubmatch(gomod)
	if want == nil {
		t.Fatal("go.mod does not require github.com/caddyserver/caddy/v2")
	}
	got := regexp.MustCompile(`(?m)^ARG CADDY_VERSION=(\S+)$`).FindSubmatch(dockerfile)
	if got == nil {
		t.Fatal("xcaddy.Dockerfile has no ARG CADDY_VERSION=<version>")
	}
	if string(got[1]) != string(want[1]) {
		t.Fatalf("xcaddy.Dockerfile builds Caddy %s, go.mod requires %s: set ARG CADDY_VERSION=%s", got[1], want[1], want[1])
	}
}
