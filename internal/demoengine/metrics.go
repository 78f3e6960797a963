package demoengine

import (
	"fmt"
	"net/http"
)

// The demo engine's /metrics, in llama-server's names (its --metrics), so
// an engine with `signals metrics` can be tried on it: the
// requests it is answering, and none deferred (it never queues).

// withMetrics serves GET /metrics on mux and counts the requests in flight
// on every other POST route.
func (s *server) withMetrics(mux *http.ServeMux) http.Handler {
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP llamacpp:requests_processing Number of requests processing.\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing %d\n", s.processing.Load())
		fmt.Fprintf(w, "# HELP llamacpp:requests_deferred Number of requests deferred.\n# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 0\n")
		fmt.Fprintf(w, "# HELP llamacpp:requests_total Requests answered.\n# TYPE llamacpp:requests_total counter\nllamacpp:requests_total %d\n", s.served.Load())
		s.warmMetrics(w)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s.processing.Add(1)
			defer s.processing.Add(-1)
		}
		mux.ServeHTTP(w, r)
	})
}
