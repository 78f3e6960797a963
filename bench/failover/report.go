//go:build unix

package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

const baselineRow = "baseline: the healthy engine asked directly"

// cell is one class under one configuration: the median and the max of its
// requests' times (a cut request counts as longer than any).
type cell struct {
	na          bool
	median, max time.Duration
	medCut      bool
	maxCut      bool
	failed, n   int
	limit       time.Duration
}

func summarize(shots []shot, after bool) cell {
	var v []time.Duration
	c := cell{n: len(shots)}
	for _, s := range shots {
		switch {
		case s.cut:
			v = append(v, math.MaxInt64)
		case s.err != nil:
			c.failed++
		case after:
			v = append(v, s.longestGap)
		default:
			v = append(v, s.firstContent)
		}
	}
	if len(v) == 0 {
		return c
	}
	slices.Sort(v)
	c.median, c.max = v[(len(v)-1)/2], v[len(v)-1]
	c.medCut, c.maxCut = c.median == math.MaxInt64, c.max == math.MaxInt64
	return c
}

func dur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func (c cell) text() string {
	if c.na {
		return "n/a"
	}
	if c.failed == c.n {
		return fmt.Sprintf("all %d failed", c.n)
	}
	show := func(d time.Duration, cut bool) string {
		if cut {
			return "> " + dur(c.limit)
		}
		return dur(d)
	}
	s := show(c.median, c.medCut) + " / " + show(c.max, c.maxCut)
	if c.failed > 0 {
		s += fmt.Sprintf(" (%d of %d failed)", c.failed, c.n)
	}
	return s
}

// table holds the cells by row (class) and column (configuration).
type table struct {
	cells  map[string]map[string]cell
	errors map[string]bool
	limit  time.Duration
}

func (t *table) set(row, col string, c cell) {
	if t.cells[row] == nil {
		t.cells[row] = map[string]cell{}
	}
	c.limit = t.limit
	t.cells[row][col] = c
}

func (t *table) print(w io.Writer, o options) {
	fmt.Fprintf(w, "## Failover time: sending to the first content delta, median / max of %d requests\n\n", o.n)
	var cols []string
	for i, c := range configs {
		if o.columns[i+1] {
			cols = append(cols, c.name)
		}
	}
	fmt.Fprintf(w, "| first candidate | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	rows, labels := []string{baselineRow}, []string{baselineRow}
	for _, c := range classes {
		// the names say the default hold and load time: say the ones used
		l := c.name
		if c.start {
			l = strings.Replace(l, "20 s", o.loadTime.String(), 1)
		} else {
			l = strings.Replace(l, "20 s", o.hold.String(), 1)
		}
		rows, labels = append(rows, c.name), append(labels, l)
	}
	for i, r := range rows {
		var cs []string
		for _, col := range cols {
			cs = append(cs, t.cells[r][col].text())
		}
		fmt.Fprintf(w, "| %s | %s |\n", labels[i], strings.Join(cs, " | "))
	}
	fmt.Fprintf(w, "\n† the longest gap between two content events the client saw (resume on; the fallback has prefill on).\n"+
		"hedge_after columns: hedge_budget 100%%, every fake engine warmed with %d healthy answers first.\n", o.warm)
	if len(o.also) > 0 {
		fmt.Fprintf(w, "every failing engine also has: %s\n", strings.Join(o.also, "; "))
	}
	if len(t.errors) > 0 {
		fmt.Fprintln(w, "\nfailed requests:")
		var es []string
		for e := range t.errors {
			es = append(es, e)
		}
		slices.Sort(es)
		for _, e := range es {
			fmt.Fprintln(w, "- "+e)
		}
	}
}
