package caddyfile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// The small readers every block uses: a position for file:line errors, an
// option set at most once, and one argument of each kind.

// pos is a place in a Caddyfile.
type pos struct {
	file string
	line int
}

func here(d *cf.Dispenser) pos { return pos{d.File(), d.Line()} }

func (p pos) String() string { return fmt.Sprintf("%s:%d", p.file, p.line) }

// errf is an error at p, worded as the dispenser's own.
func (p pos) errf(format string, args ...any) error {
	return fmt.Errorf("%s, at %s", fmt.Sprintf(format, args...), p)
}

// settings remembers where each single-value subdirective of a block was
// set: a second one is a mistake (the first would be silently lost), named
// with both lines.
type settings map[string]pos

func (s settings) once(d *cf.Dispenser) error {
	name := d.Val()
	if first, ok := s[name]; ok {
		return d.Errf("%s is set twice in this block (first at %s)", name, first)
	}
	s[name] = here(d)
	return nil
}

// countAndDuration parses a subdirective of the shape `<name> <count>
// [<duration>]` (breaker, queue): a count of 1 or more and a positive
// duration, 0 when it is left out. count and duration say what the two are
// in its errors; example is a whole line that works.
func countAndDuration(d *cf.Dispenser, count, duration, example string) (int, caddy.Duration, error) {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return 0, 0, d.Errf("%s takes a %s and optionally a %s: %s", name, count, duration, example)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		return 0, 0, d.Errf("%s takes a %s of 1 or more, not %q", name, count, args[0])
	}
	if len(args) == 1 {
		return n, 0, nil
	}
	v, err := caddy.ParseDuration(args[1])
	if err != nil || v <= 0 {
		return 0, 0, d.Errf("bad %s %s %q: want a duration such as 30s", name, duration, args[1])
	}
	return n, caddy.Duration(v), nil
}

// countArg parses a subdirective's one whole-number argument, at least min.
func countArg(d *cf.Dispenser, dst *int, min int) error {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		return d.Errf("%s takes a count of %d or more, not %q", name, min, s)
	}
	*dst = n
	return nil
}

// blockArg reads the one argument that opens a block (`pool <name> {`);
// missing is the error when it is left out, with a line that works.
func blockArg(d *cf.Dispenser, missing string) (string, error) {
	if !d.NextArg() {
		return "", d.Err(missing)
	}
	v := d.Val()
	if d.NextArg() {
		return "", d.ArgErr()
	}
	return v, nil
}

func oneArg(d *cf.Dispenser, dst *string) error {
	if !d.AllArgs(dst) {
		return d.ArgErr()
	}
	return nil
}

func durationArg(d *cf.Dispenser, dst *caddy.Duration) error {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.Errf("%s takes one duration such as 5m or 90s, not %q", name, strings.Join(args, " "))
	}
	s := args[0]
	if f, err := strconv.ParseFloat(s, 64); err == nil && f != 0 {
		// llama-swap's ttl: 60 is seconds; here a bare number is a mistake
		return d.Errf("bad %s %q: a duration needs a unit, such as %ss or 5m", name, s, s)
	}
	v, err := caddy.ParseDuration(s)
	if err != nil {
		return d.Errf("bad %s %q: %v", name, s, err)
	}
	if v < 0 {
		return d.Errf("%s may not be negative", name)
	}
	*dst = caddy.Duration(v)
	return nil
}

func parseOnOff(d *cf.Dispenser) (bool, error) {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return false, d.ArgErr()
	}
	switch s {
	case "on", "true":
		return true, nil
	case "off", "false":
		return false, nil
	}
	return false, d.Errf("%s takes on or off, not %q", name, s)
}
