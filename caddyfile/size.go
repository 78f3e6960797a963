package caddyfile

import (
	"math"
	"strconv"
	"strings"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Memory sizes (memory, memory_budget) are counted as GPUs are: a "24 GB"
// card holds 24 GiB, and nvidia-smi and rocm-smi print MiB. So every unit
// is binary here, whether written 24GB, 24G or 24GiB: an operator who
// writes memory_budget 24GB beside two memory 12GiB engines means both to
// fit. (A decimal reading, humanize's, made that budget 1.7 GiB short.)

// memoryUnits maps a unit, in lower case, to its power of 1024.
var memoryUnits = map[string]int{
	"": 0, "b": 0,
	"k": 1, "kb": 1, "ki": 1, "kib": 1,
	"m": 2, "mb": 2, "mi": 2, "mib": 2,
	"g": 3, "gb": 3, "gi": 3, "gib": 3,
	"t": 4, "tb": 4, "ti": 4, "tib": 4,
}

// ParseMemorySize reads a memory size such as 12GiB, 12GB, 12G, 1.5GiB or
// 512MiB, every unit binary; false for anything else, or for zero.
func ParseMemorySize(v string) (int64, bool) {
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := v, ""
	if i >= 0 {
		num, unit = v[:i], strings.TrimSpace(v[i:])
	}
	power, ok := memoryUnits[strings.ToLower(unit)]
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || num == "" {
		return 0, false
	}
	n := f * math.Pow(1024, float64(power))
	if n < 1 || n >= math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// sizeArg reads one memory size, such as 20GiB (GB is read as GiB too).
func sizeArg(d *cf.Dispenser) (int64, error) {
	name := d.Val()
	var v string
	if !d.AllArgs(&v) {
		return 0, d.ArgErr()
	}
	n, ok := ParseMemorySize(v)
	if !ok {
		return 0, d.Errf("%s takes a size such as 20GiB (units are binary: 20GB is 20GiB, as on a GPU), not %q", name, v)
	}
	return n, nil
}
