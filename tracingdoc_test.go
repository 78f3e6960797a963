package caddyllmgateway

import (
	"os"
	"strings"
	"testing"
)

// The first way to see a trace needs no collector: the tracing example runs
// with OTEL_TRACES_EXPORTER=console, and the observability page says so
// before it names an OTLP endpoint.
// (caddymodule's TestConsoleExporterPrintsTheGatewaysSpans proves it prints.)
func TestTracingIsFirstSeenOnTheConsole(t *testing.T) {
	example, err := os.ReadFile("examples/tracing/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(example), "\n") {
		if strings.Contains(l, "run --config examples/tracing/Caddyfile") {
			if !strings.Contains(l, "OTEL_TRACES_EXPORTER=console") {
				t.Errorf("the example's run line does not print its traces: %s", l)
			}
			break
		}
	}
	page, err := os.ReadFile("docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	console := strings.Index(string(page), "OTEL_TRACES_EXPORTER=console")
	otlp := strings.Index(string(page), "OTEL_EXPORTER_OTLP_ENDPOINT")
	if console < 0 || otlp >= 0 && otlp < console {
		t.Errorf("docs/observability.md gives OTEL_TRACES_EXPORTER=console at %d, an OTLP endpoint at %d", console, otlp)
	}
}
