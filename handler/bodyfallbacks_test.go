package handler

import (
	"strings"
	"testing"
)

func TestBodyFallbacksOverTheCapAreRefusedBeforeAnythingIsSent(t *testing.T) {
	up, hits := failing(t)
	_, url := testGateway(t, fiveEngines(up.URL), nil)
	resp, body := postJSON(t, url, `{"model":"p","fallbacks":["a","b","c","d","e"]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "too_many_fallbacks") || !strings.Contains(body, "max_fallbacks is 4") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d upstream calls for a refused request", hits.Load())
	}
	// 60,000 items are refused as fast, without resolving them
	items := strings.TrimSuffix(strings.Repeat(`"a",`, 60000), ",")
	resp, body = postJSON(t, url, `{"model":"p","fallbacks":[`+items+`]}`)
	if resp.StatusCode != 400 || hits.Load() != 0 {
		t.Fatalf("%d %s", resp.StatusCode, body[:min(len(body), 200)])
	}
}

func TestRepeatedBodyFallbacksCountOnce(t *testing.T) {
	up, hits := failing(t)
	_, url := testGateway(t, fiveEngines(up.URL), nil)
	resp, body := postJSON(t, url, `{"model":"p","fallbacks":["a","a","a/a","b","a","b","a","a"]}`)
	if resp.StatusCode != 503 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := hits.Load(); n != 3 {
		t.Fatalf("%d upstream calls, want 3 (p, a, b)", n)
	}
	// the error passed on is the primary's, whole; the attempts are listed
	if !strings.Contains(body, "attempts: p=503, a=503, b=503") || len(body) < 80000 {
		t.Fatalf("%d bytes: %s", len(body), body[len(body)-200:])
	}
}
