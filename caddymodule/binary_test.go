package caddymodule

import (
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// The real binary, built from ./cmd/caddy once per test run: what users run
// goes through Caddy's command runner and its exit codes, which calling a
// command's function does not (llm-probe returned 1 without an
// error, and Caddy exits 0 for that).
var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
	binaryOut  []byte
)

// caddyBinary returns the path of Caddy built from ./cmd/caddy. It is built
// with -race when the tests are, so the build reuses the compiled packages of
// the test binary and only links.
func caddyBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		binaryDir, binaryErr = os.MkdirTemp("", "llmgw-caddy-")
		if binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "caddy")
		if runtime.GOOS == "windows" {
			binaryPath += ".exe"
		}
		args := []string{"build", "-o", binaryPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(goTool(), append(args, "./cmd/caddy")...)
		cmd.Dir = ".."
		binaryOut, binaryErr = cmd.CombinedOutput()
	})
	if binaryErr != nil {
		t.Fatalf("building ./cmd/caddy: %v\n%s", binaryErr, binaryOut)
	}
	return binaryPath
}

// removeBinary deletes the built binary; TestMain calls it after the tests.
func removeBinary() {
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
}

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	if p := filepath.Join(build.Default.GOROOT, "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// exitCode runs cmd and returns its combined output and exit status.
func exitCode(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err == nil {
		return string(out), 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	t.Fatalf("running %v: %v", cmd.Args, err)
	return "", -1
}
