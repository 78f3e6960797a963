package demoengine

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMetricsCountTheRequestsInFlight(t *testing.T) {
	s := &server{}
	inside := make(chan struct{})
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slow", func(http.ResponseWriter, *http.Request) { close(inside); <-release })
	srv := httptest.NewServer(s.withMetrics(mux))
	defer srv.Close()
	metrics := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if m := metrics(); !strings.Contains(m, "llamacpp:requests_processing 0\n") || !strings.Contains(m, "llamacpp:requests_deferred 0\n") {
		t.Fatalf("idle: %s", m)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Post(srv.URL+"/slow", "text/plain", nil)
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-inside
	if m := metrics(); !strings.Contains(m, "llamacpp:requests_processing 1\n") {
		t.Fatalf("one in flight: %s", m)
	}
	close(release)
	<-done
}
