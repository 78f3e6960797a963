package engines

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// Device sets: a box with several GPUs gives each set of
// devices its own memory_budget (memory_budget 24GiB devices 0;
// memory_budget 48GiB devices 1,2), and an engine that says devices 1,2
// counts its memory against that set's budget only: each set is a box of
// its own, scheduled on its own. An engine with devices runs with
// CUDA_VISIBLE_DEVICES set to them, unless its env sets it.

// DeviceBudget is the memory budget of one device set.
type DeviceBudget struct {
	// Devices are the set's device ids, as CUDA numbers them.
	Devices []int `json:"devices"`
	// Budget is the memory the engines of the set share, in bytes.
	Budget int64 `json:"budget"`
}

// DeviceSet names a set of devices: its ids sorted, joined by commas
// ("1,2"); "" for none.
func DeviceSet(devices []int) string {
	ids := slices.Clone(devices)
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, d := range ids {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, ",")
}

// ParseDevices reads device ids as written in a Caddyfile: "0", "1,2",
// or several arguments ("1 2"). Ids are whole numbers from 0, each once.
func ParseDevices(args ...string) ([]int, error) {
	var ids []int
	for _, a := range args {
		for _, f := range strings.Split(a, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			n, err := strconv.Atoi(f)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("devices takes device ids such as 0 or 1,2, not %q", f)
			}
			if slices.Contains(ids, n) {
				return nil, fmt.Errorf("device %d is named twice", n)
			}
			ids = append(ids, n)
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("devices takes device ids such as 0 or 1,2")
	}
	return ids, nil
}

// memoryBoxOf is the name of the memory box of a device set.
func memoryBoxOf(devices []int) string {
	if len(devices) == 0 {
		return memoryBox
	}
	return memoryBox + ":" + DeviceSet(devices)
}

// cudaDevices is the variable that tells CUDA programs which devices they
// see.
const cudaDevices = "CUDA_VISIBLE_DEVICES"

// withDevices adds CUDA_VISIBLE_DEVICES=<devices> to env, in the order
// written, unless env sets it already or there are no devices.
func withDevices(env []string, devices []int) []string {
	if len(devices) == 0 {
		return env
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, cudaDevices+"=") {
			return env
		}
	}
	ids := make([]string, len(devices))
	for i, d := range devices {
		ids[i] = strconv.Itoa(d)
	}
	return append(env, cudaDevices+"="+strings.Join(ids, ","))
}

// MemoryError is a mistake in memory budgets and engines' memory: it names
// the engine or the device set it is about, so that the Caddyfile adapter
// can point at its line.
type MemoryError struct {
	Engine  string // the engine it is about, or ""
	Devices string // the device set (its memory_budget line) it is about, or ""
	Err     error
}

func (e *MemoryError) Error() string { return e.Err.Error() }
func (e *MemoryError) Unwrap() error { return e.Err }

// CheckMemory checks the memory budgets (budget: the one without devices;
// sets: each device set's) against the engines: sets do not share a
// device; an engine's devices are a set with a budget; an engine with
// memory has a budget to count it against; and no start can be one that
// never fits (refused at load, not left waiting forever).
func CheckMemory(budget int64, sets []DeviceBudget, cfgs []Config) error {
	if budget < 0 {
		return &MemoryError{Err: errors.New("memory_budget may not be negative")}
	}
	of := map[string]int64{}
	owner := map[int]string{}
	for _, s := range sets {
		name := DeviceSet(s.Devices)
		if len(s.Devices) == 0 {
			return &MemoryError{Err: errors.New("a memory_budget's devices name at least one device")}
		}
		if s.Budget <= 0 {
			return &MemoryError{Devices: name, Err: fmt.Errorf("memory_budget of devices %s must be a size above 0", name)}
		}
		if _, ok := of[name]; ok {
			return &MemoryError{Devices: name, Err: fmt.Errorf("memory_budget of devices %s is given twice", name)}
		}
		for _, d := range s.Devices {
			if other, ok := owner[d]; ok {
				return &MemoryError{Devices: name, Err: fmt.Errorf("device %d is in two memory_budget sets (%s and %s): a device's memory is counted once", d, other, name)}
			}
			owner[d] = name
		}
		of[name] = s.Budget
	}
	for _, c := range cfgs {
		set := DeviceSet(c.Devices)
		if c.Memory <= 0 {
			continue
		}
		size := humanize.IBytes(uint64(c.Memory))
		switch b, ok := of[set]; {
		case set == "" && budget == 0:
			return &MemoryError{Engine: c.Name, Err: fmt.Errorf("engine %s has memory %s, but the handler has no memory_budget to count it against", c.Name, size)}
		case set == "" && c.Memory > budget:
			return &MemoryError{Engine: c.Name, Err: fmt.Errorf("engine %s needs memory %s, more than the memory_budget %s: it could never start", c.Name, size, humanize.IBytes(uint64(budget)))}
		case set != "" && !ok:
			return &MemoryError{Engine: c.Name, Err: fmt.Errorf("engine %s runs on devices %s, but no memory_budget names that set (memory_budget <size> devices %s)", c.Name, set, set)}
		case set != "" && c.Memory > b:
			return &MemoryError{Engine: c.Name, Err: fmt.Errorf("engine %s needs memory %s, more than the memory_budget %s of devices %s: it could never start", c.Name, size, humanize.IBytes(uint64(b)), set)}
		}
	}
	return nil
}

// memoryBox is the name of the box of engines with a memory size; a device
// set's box is memoryBox+":"+its devices.
const memoryBox = "memory"
