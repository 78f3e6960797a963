//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// shot is one streamed chat completion as the client saw it.
type shot struct {
	firstContent time.Duration // from sending to the first content delta
	longestGap   time.Duration // the longest gap between two content events (or sending and the first)
	cut          bool          // no content (or no end) within the cap
	engine       string        // X-LLM-Engine: who answered
	err          error
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// chat sends one streaming chat completion for model to base and reads it to
// its end, at most limit.
func chat(ctx context.Context, base, model, prompt string, limit time.Duration) shot {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"model": model, "stream": true, "max_tokens": 64,
		"messages": []map[string]string{{"role": "user", "content": prompt}},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return shot{cut: ctx.Err() != nil, err: err}
	}
	defer resp.Body.Close()
	s := shot{engine: resp.Header.Get("X-LLM-Engine")}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		s.err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		return s
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	last, done := start, false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error any `json:"error"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if ev.Error != nil {
			s.err = fmt.Errorf("in-band error: %s", data)
			return s
		}
		if len(ev.Choices) == 0 || ev.Choices[0].Delta.Content == "" {
			continue
		}
		now := time.Now()
		if s.firstContent == 0 {
			s.firstContent = now.Sub(start)
		}
		s.longestGap = max(s.longestGap, now.Sub(last))
		last = now
	}
	if !done {
		if ctx.Err() != nil {
			s.cut = true
		} else if s.err == nil {
			s.err = fmt.Errorf("stream ended without [DONE]: %v", sc.Err())
		}
	}
	return s
}

// scrape reads the admin /metrics page and sums, per metric name, the
// samples whose engine label is in engines (all when engines is nil).
func scrape(ctx context.Context, admin string, engines map[string]bool) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sums := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "llm_gateway_") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:sp], "{")
		if engines != nil {
			eng := ""
			if _, rest, ok := strings.Cut(labels, `engine="`); ok {
				eng, _, _ = strings.Cut(rest, `"`)
			}
			if !engines[eng] {
				continue
			}
		}
		if strings.Contains(labels, `winner="`) {
			_, rest, _ := strings.Cut(labels, `winner="`)
			w, _, _ := strings.Cut(rest, `"`)
			sums[name+"/"+w] += v
		}
		sums[name] += v
	}
	return sums, sc.Err()
}
