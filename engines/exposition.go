package engines

import (
	"bytes"
	"errors"
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Engines print Prometheus text that a strict parser refuses: a fresh
// llama-server prints `llamacpp:n_busy_slots_per_decode -nan` until its
// first decode (C's printf of a NaN with its sign bit set; MSVC's is
// "-nan(ind)"), and one line the parser refuses loses the whole page, and
// with it the load and capacity of an engine just when a pool meets it for
// the first time. So the page is read a sample at a time: a value spelled
// as C spells NaN is read as NaN (Go's strconv already takes inf, +Inf,
// -Infinity and NaN in any case), and a line the parser still refuses is
// dropped and counted, never the page.

// maxSkippedLines bounds the lines dropped from one page: each costs one
// more parse of it, and a page with that many bad lines is not an
// exposition.
const maxSkippedLines = 32

// parseExposition parses a Prometheus text exposition, dropping the lines
// it cannot parse; it returns the families and how many lines it dropped.
// It fails when the page cannot be read, or when every sample on it was
// dropped (an HTML error page is not an empty exposition).
func parseExposition(r io.Reader) (map[string]*dto.MetricFamily, int, error) {
	page, err := io.ReadAll(r)
	if err != nil {
		return nil, 0, err
	}
	lines := bytes.Split(page, []byte("\n"))
	for i, l := range lines {
		lines[i] = normalizeSample(l)
	}
	skipped := 0
	for {
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(bytes.Join(lines, []byte("\n"))))
		if err == nil {
			if len(fams) == 0 && skipped > 0 {
				return nil, skipped, errors.New("no sample of the page could be parsed")
			}
			return fams, skipped, nil
		}
		// the parser names the line it refused: blank it (line numbers
		// stay those of the page) and parse again
		var pe expfmt.ParseError
		if !errors.As(err, &pe) || pe.Line < 1 || pe.Line > len(lines) ||
			len(bytes.TrimSpace(lines[pe.Line-1])) == 0 || skipped == maxSkippedLines {
			return nil, skipped, err
		}
		lines[pe.Line-1] = nil
		skipped++
	}
}

// normalizeSample returns line with its value spelled as Go reads it when
// it is a NaN spelled as C prints one (-nan, +NaN, nan(ind), …); any other
// line as it is.
func normalizeSample(line []byte) []byte {
	s := string(bytes.TrimRight(line, "\r"))
	if t := strings.TrimLeft(s, " \t"); t == "" || t[0] == '#' {
		return line
	}
	start := valueStart(s)
	if start < 0 {
		return line
	}
	end := start
	for end < len(s) && s[end] != ' ' && s[end] != '\t' {
		end++
	}
	v := strings.ToLower(s[start:end])
	v = strings.TrimLeft(v, "+-")
	if !strings.HasPrefix(v, "nan") || v == "nan" && s[start] != '+' && s[start] != '-' {
		return line
	}
	return []byte(s[:start] + "NaN" + s[end:])
}

// valueStart is the index of a sample line's value: after the metric name
// and its labels (whose quoted values may hold spaces and braces); -1 when
// the line has none.
func valueStart(s string) int {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for i < len(s) && s[i] != '{' && s[i] != ' ' && s[i] != '\t' {
		i++
	}
	if i < len(s) && s[i] == '{' {
		if i = closingBrace(s, i); i < 0 {
			return -1
		}
		i++
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i == len(s) {
		return -1
	}
	return i
}

// closingBrace is the index of the '}' that closes the label set opening
// at s[open], past quoted values; -1 when the line ends first.
func closingBrace(s string, open int) int {
	quoted := false
	for i := open + 1; i < len(s); i++ {
		switch {
		case quoted && s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && s[i] == '}':
			return i
		}
	}
	return -1
}
