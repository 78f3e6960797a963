package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ParseQuery reads a Filter from a query string, the one syntax of the
// admin API and the status page:
//
//	model=  key=  engine=  status=503|5xx|error
//	api=    chat, messages, responses, …: spoken by the client or the
//	        engine; translated: the engine was spoken to in another API
//	since=  RFC 3339 time, Unix milliseconds, or a duration back from now (1h)
//	before= a record's seq: the page after it
//	limit=  at most this many (default 100, at most 1000; an export: all)
func ParseQuery(q url.Values, now time.Time) (Filter, error) {
	f := Filter{Model: q.Get("model"), Key: q.Get("key"), Engine: q.Get("engine"), Status: q.Get("status"), API: q.Get("api")}
	if err := ParseStatus(f.Status); err != nil {
		return f, err
	}
	if s := q.Get("since"); s != "" {
		since, err := parseSince(s, now)
		if err != nil {
			return f, err
		}
		f.Since = since
	}
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return f, fmt.Errorf("before %q: want a record's seq", s)
		}
		f.Before = n
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return f, fmt.Errorf("limit %q: want 1 to %d", s, MaxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

func parseSince(s string, now time.Time) (int64, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UnixMilli(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d).UnixMilli(), nil
	}
	return 0, fmt.Errorf("since %q: want an RFC 3339 time, Unix milliseconds or a duration such as 1h", s)
}

// WantsLines reports whether the caller asked for JSON lines: ?format=jsonl
// or Accept: application/x-ndjson.
func WantsLines(r *http.Request) bool {
	return r.URL.Query().Get("format") == "jsonl" || strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
}

// Page is one page of a query, as the admin API and the page answer it.
type Page struct {
	Requests []Record `json:"requests"`
	// Next is the next page's before=, 0 on the last page.
	Next       uint64 `json:"next,omitempty"`
	Keep       int    `json:"keep"`
	MaxAge     string `json:"max_age"`
	MaxAgeSecs int64  `json:"max_age_s"`
	Stored     string `json:"stored"` // file or memory
}

// QueryPage answers one page of f.
func (s *Store) QueryPage(f Filter) (Page, error) {
	recs, err := s.Query(f)
	if err != nil {
		return Page{}, err
	}
	keep, maxAge := s.Limits()
	p := Page{Requests: recs, Keep: keep, MaxAge: maxAge.String(), MaxAgeSecs: int64(maxAge / time.Second), Stored: "file"}
	if s.InMemory() {
		p.Stored = "memory"
	}
	if len(recs) == f.limit() {
		p.Next = recs[len(recs)-1].Seq
	}
	return p, nil
}

// WriteLines writes the records f selects as JSON lines, newest first: all
// of them, or f.Limit when it is set. It reads the store a page at a time,
// so a slow reader never holds the store.
func (s *Store) WriteLines(w http.ResponseWriter, f Filter) error {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	left := f.Limit
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for {
		page := f
		page.Limit = MaxLimit
		if left > 0 {
			page.Limit = min(left, MaxLimit)
		}
		recs, err := s.Query(page)
		if err != nil {
			return err
		}
		for i := range recs {
			if err := enc.Encode(&recs[i]); err != nil {
				return err
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if left > 0 {
			if left -= len(recs); left <= 0 {
				return nil
			}
		}
		if len(recs) < page.Limit {
			return nil
		}
		f.Before = recs[len(recs)-1].Seq
	}
}
