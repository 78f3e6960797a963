// Command swapbound computes what no scheduler can beat on issue 29's trace
// (bench/swap.sh): 64 requests, one every 250 ms, models "A B A A C A B C"
// × 8, one engine loaded at a time, 2 s to load one. For k engine starts
// and a latency T it searches every schedule, knowing the future and with
// answers taking no time, for one in which at most 3 of the 64 requests
// (the p95 by nearest rank: the 61st) wait longer than T. A start may
// begin only on the grid (-grid, 250 ms by default; a finer grid finds
// schedules at most a grid step better and searches far longer).
//
//	go run ./bench/swapbound -k 7               # T from 5 to 7.5 s
//	go run ./bench/swapbound -k 7 -grid 62.5ms -t 5.5s,5.75s
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

const pattern = "ABAACABC"

type search struct {
	model, at []int // each request's model (0–2) and arrival, in grid steps
	load      int   // a load, in grid steps
	horizon   int   // the last step a start may begin on
	allow     int   // requests that may wait longer than T
	limit     int   // T, in grid steps
	last      int   // the earliest last answer of a schedule found
}

func main() {
	k := flag.Int("k", 7, "engine starts")
	grid := flag.Duration("grid", 250*time.Millisecond, "the times a start may begin on")
	ts := flag.String("t", "5s,5.5s,6s,6.5s,7s,7.5s", "latencies T to try, comma-separated")
	flag.Parse()
	gap, load := 250*time.Millisecond, 2*time.Second
	if gap%*grid != 0 || load%*grid != 0 {
		fmt.Fprintln(os.Stderr, "swapbound: -grid must divide 250ms")
		os.Exit(2)
	}
	s := &search{load: int(load / *grid), horizon: int(30 * time.Second / *grid), allow: 3}
	for j := range 64 {
		s.model = append(s.model, int(pattern[j%8]-'A'))
		s.at = append(s.at, j*int(gap / *grid))
	}
	for _, t := range strings.Split(*ts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(t))
		if err != nil {
			fmt.Fprintln(os.Stderr, "swapbound:", err)
			os.Exit(2)
		}
		s.limit, s.last = int(d / *grid), 1<<30
		found := false
		for m := range 3 {
			found = s.try(*k-1, 0, m, [3]int{}, 0, 0) || found
		}
		if found {
			fmt.Printf("k=%d T=%v: a schedule exists (last answer at %v)\n", *k, d, time.Duration(s.last)**grid)
		} else {
			fmt.Printf("k=%d T=%v: no schedule\n", *k, d)
		}
	}
}

// try: an engine of model m starts loading at step start, with left starts
// after it; served[x] says model x's requests arriving before it are
// answered; over counts the requests that waited longer than T so far,
// latest is the last answer so far.
func (s *search) try(left, start, m int, served [3]int, over, latest int) bool {
	ready := start + s.load
	ends := []int{1 << 30} // the last engine serves what is left
	if left > 0 {
		ends = ends[:0]
		for e := ready; e <= s.horizon; e++ {
			ends = append(ends, e)
		}
	}
	found := false
	for _, end := range ends {
		v, last := over, latest
		for j, at := range s.at {
			if s.model[j] == m && at >= served[m] && at < end {
				done := max(at, ready)
				last = max(last, done)
				if done-at > s.limit {
					v++
				}
			}
		}
		if v > s.allow {
			break // a later end answers more requests late, never fewer
		}
		next := served
		next[m] = end
		// requests of the other models that came before end wait at
		// least until the next engine is loaded
		doomed := v
		for j, at := range s.at {
			if x := s.model[j]; x != m && at >= next[x] && at < end && end+s.load-at > s.limit {
				doomed++
			}
		}
		if doomed > s.allow {
			continue
		}
		if left == 0 {
			if s.allAnswered(next) {
				found, s.last = true, min(s.last, last)
			}
			continue
		}
		for x := range 3 {
			if x != m && s.try(left-1, end, x, next, v, last) {
				found = true
			}
		}
	}
	return found
}

// allAnswered reports whether every request came before its model's last
// engine stopped.
func (s *search) allAnswered(served [3]int) bool {
	for j, at := range s.at {
		if at >= served[s.model[j]] {
			return false
		}
	}
	return true
}
