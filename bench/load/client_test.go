//go:build unix

package main

import (
	"strings"
	"testing"
)

// A stream that ended without data: [DONE] is reported with its last event:
// a gateway's in-band error says why it ended (the one stream in
// 20,000 that ended so was never explained).
func TestLastEventNamesWhatEndedAStream(t *testing.T) {
	tail := []byte("data: {\"choices\":[]}\n\ndata: {\"error\":{\"message\":\"engine up: connect refused\"}}\n\n")
	got := lastEvent(tail)
	if !strings.Contains(got, `connect refused`) || strings.Contains(got, "choices") {
		t.Fatalf("lastEvent = %s", got)
	}
	if got := lastEvent(nil); got != "" {
		t.Fatalf("lastEvent(nil) = %q", got)
	}
}
