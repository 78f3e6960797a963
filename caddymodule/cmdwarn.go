package caddymodule

import (
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Warnings at load about an engine's cmd, for what would otherwise show
// only at its first start, or never: a program that is not there, and an
// engine told to listen on every interface. Both are warnings, not errors:
// a program may be installed before the first request (a container image
// pulled, a mount that comes up later), and an engine on 0.0.0.0 may sit
// behind a firewall the gateway cannot see.

const (
	warnNoProgram = "an engine's program is not found: the engine cannot start until it is there"
	warnOpenCmd   = "an engine's cmd makes it listen beyond this machine: anyone who reaches that address uses it directly, around the gateway's keys and limits (give it --host 127.0.0.1)"
)

// warnAboutCommands logs both warnings for each engine the gateway starts.
func warnAboutCommands(logger *zap.Logger, es []engines.Config) {
	for _, ec := range es {
		if len(ec.Cmd) == 0 {
			continue
		}
		if err := findProgram(ec.Cmd[0], ec.Dir); err != nil {
			logger.Warn(warnNoProgram, zap.String("engine", ec.Name), zap.String("program", ec.Cmd[0]), zap.String("error", err.Error()))
		}
		if listen := openListen(ec.Cmd, ec.Env); listen != "" {
			logger.Warn(warnOpenCmd, zap.String("engine", ec.Name), zap.String("listen", listen))
		}
	}
}

// findProgram looks program up as the engine's start will: a bare name in
// the gateway's PATH (exec.Command's lookup), a relative path from the
// engine's dir. A name still holding a placeholder is not checked.
func findProgram(program, dir string) error {
	if strings.Contains(program, "{") {
		return nil
	}
	if strings.ContainsRune(program, filepath.Separator) || strings.Contains(program, "/") {
		if !filepath.IsAbs(program) && dir != "" {
			program = filepath.Join(dir, program)
		}
	}
	_, err := exec.LookPath(program)
	return err
}

// openListen returns the words of an engine's command or environment that
// make it listen on a non-loopback address ("--host 0.0.0.0", a Docker
// "-p 8080:8000" without an address, "OLLAMA_HOST=0.0.0.0"), or "". A
// `sh -c "…"` script is read word by word too.
func openListen(cmd, env []string) string {
	var words []string
	for _, a := range cmd {
		words = append(words, strings.Fields(a)...)
	}
	docker := false
	if len(cmd) > 0 {
		base := filepath.Base(cmd[0])
		docker = base == "docker" || base == "podman"
	}
	for i, w := range words {
		name, value, inline := strings.Cut(w, "=")
		if !inline && i+1 < len(words) {
			value = words[i+1]
		}
		switch {
		case name == "--host" && !strings.Contains(value, "{") && !loopbackHost(value):
			return "--host " + value
		case docker && (name == "-p" || name == "--publish") && !loopbackPublish(value):
			return name + " " + value
		}
	}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "OLLAMA_HOST" && !loopbackHost(hostOf(v)) {
			return kv
		}
	}
	return ""
}

// loopbackHost reports whether host is only this machine: localhost or a
// loopback address. 0.0.0.0, ::, a LAN address or another name is not.
func loopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// loopbackPublish reports whether a Docker port mapping binds loopback:
// 127.0.0.1:8080:8000 does; 8080:8000 and 8000 bind every interface.
func loopbackPublish(mapping string) bool {
	if strings.HasPrefix(mapping, "[") { // [::1]:8080:8000
		end := strings.Index(mapping, "]")
		return end > 0 && loopbackHost(mapping[:end+1])
	}
	parts := strings.Split(mapping, ":")
	return len(parts) == 3 && loopbackHost(parts[0])
}

// hostOf is the host of OLLAMA_HOST's value: "0.0.0.0", "0.0.0.0:11434",
// "http://127.0.0.1:11434".
func hostOf(v string) string {
	if _, rest, ok := strings.Cut(v, "://"); ok {
		v = rest
	}
	if strings.HasPrefix(v, "[") {
		if end := strings.Index(v, "]"); end > 0 {
			return v[:end+1]
		}
	}
	host, _, _ := strings.Cut(v, ":")
	return host
}
