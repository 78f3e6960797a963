package price

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The built-in table: the cloud providers' published prices of the models
// people use, one data file (builtin.json) with each entry's date and
// source, embedded. It is data, not code: updating a price is an edit of
// that file, and its test holds every entry to a date, a source and
// positive prices.

//go:embed builtin.json
var builtinJSON []byte

// Entry is one row of the table: the price of some models of a provider,
// as read from a page on a date.
type Entry struct {
	Provider string   `json:"provider"`
	Models   []string `json:"models"` // as canonical names (Canonical)
	Price    Price    `json:"-"`
	Date     string   `json:"date"`   // when the page was read, YYYY-MM-DD
	Source   string   `json:"source"` // the page
}

// Provider is a cloud provider the table prices: its name (an engine's
// provider), the hosts of its API (an engine without a provider whose
// `to` is one of them is that provider's), and the providers whose prices
// it also serves at (Vertex serves Gemini and Claude at theirs).
type Provider struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
	Also  []string `json:"also,omitempty"`
	Note  string   `json:"note,omitempty"`
}

// Table is the built-in table, read once.
type Table struct {
	Providers []Provider
	Entries   []Entry
	byModel   map[string]map[string]int // provider → canonical model → entry
}

// file is builtin.json's shape; prices are decimal strings, read exactly.
type file struct {
	About     string     `json:"about"`
	Providers []Provider `json:"providers"`
	Prices    []struct {
		Entry
		Input      string  `json:"input"`
		Output     string  `json:"output"`
		CacheRead  *string `json:"cache_read"`
		CacheWrite *string `json:"cache_write"`
		Reasoning  *string `json:"reasoning"`
	} `json:"prices"`
}

var builtin = sync.OnceValues(func() (*Table, error) { return parseTable(builtinJSON) })

// Builtin is the built-in table. The file is the repository's own and its
// test reads it, so an error here is a build that skipped the tests: it
// panics rather than price every answer at nothing.
func Builtin() *Table {
	t, err := builtin()
	if err != nil {
		panic("internal/price: builtin.json: " + err.Error())
	}
	return t
}

// parseTable reads and checks a table: every entry of a known provider,
// with models, a date, an https source, and positive input and output
// prices; no model priced twice by one provider.
func parseTable(b []byte) (*Table, error) {
	var f file
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	t := &Table{Providers: f.Providers, byModel: map[string]map[string]int{}}
	for _, p := range f.Providers {
		if p.Name == "" || len(p.Hosts) == 0 {
			return nil, fmt.Errorf("provider %q: a name and its hosts", p.Name)
		}
		t.byModel[p.Name] = map[string]int{}
	}
	for _, p := range f.Providers {
		for _, a := range p.Also {
			if _, ok := t.byModel[a]; !ok {
				return nil, fmt.Errorf("provider %s: also %q is no provider of the table", p.Name, a)
			}
		}
	}
	for i, row := range f.Prices {
		e := row.Entry
		where := fmt.Sprintf("price %d (%s %v)", i+1, e.Provider, e.Models)
		models, ok := t.byModel[e.Provider]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: no provider %q in the table", where, e.Provider)
		case len(e.Models) == 0:
			return nil, fmt.Errorf("%s: no models", where)
		}
		if _, err := time.Parse(time.DateOnly, e.Date); err != nil {
			return nil, fmt.Errorf("%s: date %q: want YYYY-MM-DD, the day the source was read", where, e.Date)
		}
		if u, err := url.Parse(e.Source); err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("%s: source %q: want the https page the price was read from", where, e.Source)
		}
		var parts Parts
		var err error
		if parts.Input, err = ParseRate(row.Input); err != nil {
			return nil, fmt.Errorf("%s: input: %v", where, err)
		}
		if parts.Output, err = ParseRate(row.Output); err != nil {
			return nil, fmt.Errorf("%s: output: %v", where, err)
		}
		if parts.Input <= 0 || parts.Output <= 0 {
			return nil, fmt.Errorf("%s: input and output prices must be positive", where)
		}
		for _, opt := range []struct {
			s   *string
			dst **Rate
		}{{row.CacheRead, &parts.CacheRead}, {row.CacheWrite, &parts.CacheWrite}, {row.Reasoning, &parts.Reasoning}} {
			if opt.s == nil {
				continue
			}
			r, err := ParseRate(*opt.s)
			if err != nil || r <= 0 {
				return nil, fmt.Errorf("%s: %q: want a positive price (%v)", where, *opt.s, err)
			}
			*opt.dst = &r
		}
		e.Price = parts.Complete()
		for _, m := range e.Models {
			if Canonical(m) != m {
				return nil, fmt.Errorf("%s: model %q: write its canonical name %q", where, m, Canonical(m))
			}
			if j, dup := models[m]; dup {
				return nil, fmt.Errorf("%s: model %s is priced twice (price %d too)", where, m, j+1)
			}
			models[m] = len(t.Entries)
		}
		t.Entries = append(t.Entries, e)
	}
	return t, nil
}

// Lookup is the price of model at provider: the provider's own entry for
// the model's name or its canonical name, else an entry of a provider it
// also serves at.
func (t *Table) Lookup(provider, model string) (Entry, bool) {
	// every answer of a cloud engine is priced: the names are made once,
	// the canonical one only when the model's own name is not in the table
	lower, canon, also := strings.ToLower(model), "", t.also(provider)
	for k := -1; k < len(also); k++ {
		p := provider
		if k >= 0 {
			p = also[k]
		}
		if i, ok := t.byModel[p][lower]; ok {
			return t.Entries[i], true
		}
		if canon == "" {
			canon = Canonical(model)
		}
		if i, ok := t.byModel[p][canon]; ok {
			return t.Entries[i], true
		}
	}
	return Entry{}, false
}

func (t *Table) also(provider string) []string {
	for _, p := range t.Providers {
		if p.Name == provider {
			return p.Also
		}
	}
	return nil
}

// ProviderOfHost is the provider whose API host is host ("api.openai.com"
// is openai's), "" for none: an engine without a provider whose `to` is a
// cloud API is priced as that provider's.
func (t *Table) ProviderOfHost(host string) string {
	host = strings.ToLower(host)
	for _, p := range t.Providers {
		for _, h := range p.Hosts {
			if hostMatches(h, host) {
				return p.Name
			}
		}
	}
	return ""
}

// hostMatches matches a host against a pattern with at most one *, which
// stands for one or more characters of one label or more.
func hostMatches(pattern, host string) bool {
	before, after, wild := strings.Cut(pattern, "*")
	if !wild {
		return pattern == host
	}
	return len(host) > len(before)+len(after) && strings.HasPrefix(host, before) && strings.HasSuffix(host, after)
}

// Canonical is a model's name without what varies between a provider's
// names of one priced model: lower case; Bedrock's cross-region prefix
// (us., eu., apac., global., …) and vendor prefix (anthropic., amazon.,
// meta., …); a version after : or @ (Bedrock's :0, Vertex's @20241022);
// a -v2 revision; a date or revision suffix (-20241022, -2024-08-06, -001)
// and -latest. "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
// "claude-3-5-sonnet-v2@20241022" and "claude-3-5-sonnet-latest" are all
// claude-3-5-sonnet.
func Canonical(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if parts := strings.SplitN(m, ".", 3); len(parts) == 3 && geoPrefixes[parts[0]] && vendorPrefixes[parts[1]] {
		m = parts[1] + "." + parts[2]
	}
	if vendor, rest, ok := strings.Cut(m, "."); ok && vendorPrefixes[vendor] {
		m = rest
	}
	if i := strings.IndexAny(m, ":@"); i > 0 {
		m = m[:i]
	}
	for {
		trimmed := trimSuffixes(m)
		if trimmed == m {
			return m
		}
		m = trimmed
	}
}

// trimSuffixes takes one versioning suffix off m, if it has one.
func trimSuffixes(m string) string {
	if s, ok := strings.CutSuffix(m, "-latest"); ok {
		return s
	}
	i := strings.LastIndexByte(m, '-')
	if i <= 0 {
		return m
	}
	last := m[i+1:]
	switch {
	case len(last) >= 2 && last[0] == 'v' && allDigits(last[1:]):
		return m[:i] // -v2
	case len(last) == 8 && allDigits(last), len(last) == 3 && allDigits(last):
		return m[:i] // -20241022, -001
	case len(last) == 2 && allDigits(last) && strings.Count(m, "-") >= 3:
		// -2024-08-06: year, month and day
		if j := strings.LastIndexByte(m[:i], '-'); j > 0 && len(m[j+1:i]) == 2 && allDigits(m[j+1:i]) {
			if k := strings.LastIndexByte(m[:j], '-'); k > 0 && len(m[k+1:j]) == 4 && allDigits(m[k+1:j]) {
				return m[:k]
			}
		}
	}
	return m
}

// geoPrefixes are Bedrock's cross-region inference profiles' prefixes.
var geoPrefixes = map[string]bool{"us": true, "eu": true, "apac": true, "global": true, "us-gov": true, "jp": true, "au": true, "ca": true}

// vendorPrefixes are the vendors Bedrock's model ids start with.
var vendorPrefixes = map[string]bool{"anthropic": true, "amazon": true, "meta": true, "mistral": true, "cohere": true,
	"ai21": true, "deepseek": true, "openai": true, "qwen": true, "writer": true}
