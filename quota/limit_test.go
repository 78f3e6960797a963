package quota

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseLimit(t *testing.T) {
	good := []struct {
		spec string
		want Limit
	}{
		{"60/m", Limit{60, Minute}},
		{"200k/d", Limit{200_000, Day}},
		{"1.5M/mo", Limit{1_500_000, Month}},
		{"10/s", Limit{10, Second}},
		{"1000/h", Limit{1000, Hour}},
		{"2G/month", Limit{2_000_000_000, Month}},
		{"1.25k/hour", Limit{1250, Hour}},
		{"5/minute", Limit{5, Minute}},
		{"1/second", Limit{1, Second}},
		{"3K/day", Limit{3000, Day}},
		{"1.500M/mo", Limit{1_500_000, Month}},
		{"9223372036854775807/s", Limit{9223372036854775807, Second}},
	}
	for _, tc := range good {
		got, err := ParseLimit(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	bad := []struct{ spec, says string }{
		{"", "want COUNT/WINDOW"},
		{"60", "want COUNT/WINDOW"},
		{"60/x", `unknown window "x"`},
		{"60/M", `unknown window "M"`},
		{"/m", "no count"},
		{"0/m", "at least 1"},
		{"-1/m", "not a number"},
		{"1.5/m", "not a whole number"},
		{"1m/d", "use M for a million"},
		{"1.0005k/m", "not a whole number"},
		{"k/m", "not a number"},
		{"1.k/m", "not a number"},
		{"1e3/m", "not a number"},
		{" 60/m", "not a number"},
		{"99999999999999999999/m", "too large"},
		{"9223372036854775807k/m", "too large"},
		{"9223372036854775.9k/m", "too large"},
	}
	for _, tc := range bad {
		_, err := ParseLimit(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), tc.spec) {
			t.Errorf("ParseLimit(%q) = %v; want an error naming the spec and saying %q", tc.spec, err, tc.says)
		}
	}
}

func TestLimitStringRoundTrips(t *testing.T) {
	for spec, want := range map[string]string{
		"60/m": "60/m", "200k/d": "200k/d", "1.5M/mo": "1500k/mo", "2000000/h": "2M/h",
		"1001/s": "1001/s", "3G/mo": "3G/mo", "5/minute": "5/m",
	} {
		l, err := ParseLimit(spec)
		if err != nil {
			t.Fatal(err)
		}
		if l.String() != want {
			t.Errorf("%s prints as %s, want %s", spec, l, want)
		}
		back, err := ParseLimit(l.String())
		if err != nil || back != l {
			t.Errorf("%s → %s → %+v, %v", spec, l, back, err)
		}
	}
}

func TestRulesInJSONAreSpecs(t *testing.T) {
	var r Rules
	if err := json.Unmarshal([]byte(`{"rate":["60/m","1k/h"],"tokens":["1.5M/mo"]}`), &r); err != nil {
		t.Fatal(err)
	}
	want := Rules{Rate: []Limit{{60, Minute}, {1000, Hour}}, Tokens: []Limit{{1_500_000, Month}}}
	if len(r.Rate) != 2 || r.Rate[0] != want.Rate[0] || r.Rate[1] != want.Rate[1] || r.Tokens[0] != want.Tokens[0] {
		t.Fatalf("got %+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"rate":["60/m","1k/h"],"tokens":["1500k/mo"]}` {
		t.Errorf("marshalled as %s", b)
	}
	if err := json.Unmarshal([]byte(`{"rate":["60/x"]}`), &r); err == nil || !strings.Contains(err.Error(), `unknown window "x"`) {
		t.Errorf("bad spec in JSON: %v", err)
	}
	if err := (Rules{Rate: []Limit{{0, Minute}}}).Validate(); err == nil {
		t.Error("a zero limit built in code passed Validate")
	}
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"60/m", "200k/d", "1.5M/mo", "10/s", "1000/h", "1.0005k/m", "/", "9.9G/mo", "-1/m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		l, err := ParseLimit(spec)
		if err != nil {
			if !strings.Contains(err.Error(), "limit ") {
				t.Fatalf("error %q does not name the limit", err)
			}
			return
		}
		if l.N <= 0 || l.Window >= numWindows {
			t.Fatalf("%q parsed to an invalid %+v", spec, l)
		}
		back, err := ParseLimit(l.String())
		if err != nil || back != l {
			t.Fatalf("%q → %+v → %q → %+v, %v", spec, l, l.String(), back, err)
		}
	})
}

func TestWindowsAreAlignedToUTC(t *testing.T) {
	at := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.Unix()
	}
	cases := []struct {
		w          Window
		now        string
		start, end string
	}{
		{Second, "2026-03-04T12:34:56Z", "2026-03-04T12:34:56Z", "2026-03-04T12:34:57Z"},
		{Minute, "2026-03-04T12:34:56Z", "2026-03-04T12:34:00Z", "2026-03-04T12:35:00Z"},
		{Hour, "2026-03-04T12:34:56Z", "2026-03-04T12:00:00Z", "2026-03-04T13:00:00Z"},
		{Day, "2026-03-04T12:34:56Z", "2026-03-04T00:00:00Z", "2026-03-05T00:00:00Z"},
		// a day is the UTC day, wherever the clock's zone says it is
		{Day, "2026-03-04T23:30:00-05:00", "2026-03-05T00:00:00Z", "2026-03-06T00:00:00Z"},
		{Month, "2026-01-31T23:59:59Z", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"},
		{Month, "2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{Month, "2028-02-29T12:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
		{Month, "2026-12-31T23:59:59Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{Month, "2026-05-01T00:30:00+02:00", "2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z"},
		{Minute, "1969-12-31T23:59:30Z", "1969-12-31T23:59:00Z", "1970-01-01T00:00:00Z"},
	}
	for _, tc := range cases {
		start, end := tc.w.bounds(at(tc.now))
		if start != at(tc.start) || end != at(tc.end) {
			t.Errorf("%v window at %s = [%s, %s), want [%s, %s)", tc.w, tc.now,
				time.Unix(start, 0).UTC().Format(time.RFC3339), time.Unix(end, 0).UTC().Format(time.RFC3339), tc.start, tc.end)
		}
	}
}
