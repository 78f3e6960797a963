package tinygguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// File is a GGUF file as Parse reads it: enough to check what Write wrote
// against the spec, independently of how Write builds it.
type File struct {
	Version    uint32
	Alignment  uint64
	Metadata   []KV // in file order
	Tensors    []TensorInfo
	DataOffset uint64 // where the tensor data starts, from the start of the file
}

// KV is one metadata pair. Value is the Go type of its GGUF type (uint32,
// int32, float32, bool, string, …), or an Array.
type KV struct {
	Key   string
	Value any
}

// Array is an array metadata value.
type Array struct {
	Type   uint32 // the GGUF type of every element
	Values []any
}

// TensorInfo is one tensor's entry: Dims in ggml order (the first is the row
// length), Offset relative to DataOffset.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   uint32
	Offset uint64
	Size   uint64 // bytes, unpadded
}

// Get returns the value of key.
func (f *File) Get(key string) (any, bool) {
	for _, kv := range f.Metadata {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Parse reads a whole GGUF v3 file and checks what a loader would refuse:
// the magic and version, unique keys and tensor names, a power-of-two
// alignment, tensor offsets that are aligned and follow one another as ggml
// requires, and a data section that ends exactly at the end of the file.
// It knows the sizes of F32 and F16 tensors only.
func Parse(data []byte) (*File, error) {
	r := &reader{b: data}
	if magic := r.bytes(4); r.err == nil && string(magic) != "GGUF" {
		return nil, fmt.Errorf("magic %q, want \"GGUF\"", magic)
	}
	f := &File{Version: r.u32(), Alignment: 32}
	if r.err == nil && f.Version != 3 {
		return nil, fmt.Errorf("version %d, want 3", f.Version)
	}
	nTensors, nKV := r.u64(), r.u64()
	if r.err != nil {
		return nil, fmt.Errorf("header: %w", r.err)
	}

	keys := map[string]bool{}
	for i := uint64(0); i < nKV; i++ {
		key := r.str()
		value := r.value(r.u32())
		if r.err != nil {
			return nil, fmt.Errorf("metadata pair %d: %w", i, r.err)
		}
		if key == "" || keys[key] {
			return nil, fmt.Errorf("metadata pair %d: empty or repeated key %q", i, key)
		}
		keys[key] = true
		f.Metadata = append(f.Metadata, KV{key, value})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, isU32 := v.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 || a%8 != 0 {
			return nil, fmt.Errorf("general.alignment %v (%T): want a uint32 power of two, a multiple of 8", v, v)
		}
		f.Alignment = uint64(a)
	}

	names := map[string]bool{}
	var want uint64 // where the next tensor must start
	for i := uint64(0); i < nTensors; i++ {
		t := TensorInfo{Name: r.str()}
		nDims := r.u32()
		if r.err == nil && (nDims == 0 || nDims > 4) {
			return nil, fmt.Errorf("tensor %q: %d dimensions", t.Name, nDims)
		}
		for range nDims {
			t.Dims = append(t.Dims, r.u64())
		}
		t.Type, t.Offset = r.u32(), r.u64()
		if r.err != nil {
			return nil, fmt.Errorf("tensor info %d: %w", i, r.err)
		}
		if t.Name == "" || len(t.Name) > 64 || names[t.Name] {
			return nil, fmt.Errorf("tensor %d: empty, too long or repeated name %q", i, t.Name)
		}
		names[t.Name] = true
		size, err := tensorSize(t)
		if err != nil {
			return nil, err
		}
		t.Size = size
		if t.Offset != want {
			return nil, fmt.Errorf("tensor %q at offset %d, want %d (aligned, one after another)", t.Name, t.Offset, want)
		}
		want = align(t.Offset+t.Size, f.Alignment)
		f.Tensors = append(f.Tensors, t)
	}

	f.DataOffset = align(uint64(r.off), f.Alignment)
	if end := f.DataOffset + want; end != uint64(len(data)) {
		return nil, fmt.Errorf("tensor data ends at %d, the file at %d", end, len(data))
	}
	return f, nil
}

// Tensor returns the values of an F32 tensor of a file Parse read from data.
func (f *File) Tensor(data []byte, name string) ([]float32, error) {
	for _, t := range f.Tensors {
		if t.Name != name {
			continue
		}
		if t.Type != ggmlF32 {
			return nil, fmt.Errorf("tensor %q has type %d, not F32", name, t.Type)
		}
		raw := data[f.DataOffset+t.Offset:][:t.Size]
		vs := make([]float32, len(raw)/4)
		for i := range vs {
			vs[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return vs, nil
	}
	return nil, fmt.Errorf("no tensor %q", name)
}

func tensorSize(t TensorInfo) (uint64, error) {
	var elem uint64
	switch t.Type {
	case 0: // F32
		elem = 4
	case 1: // F16
		elem = 2
	default:
		return 0, fmt.Errorf("tensor %q: type %d, this reader knows F32 and F16 only", t.Name, t.Type)
	}
	n := elem
	for _, d := range t.Dims {
		if d == 0 || n > math.MaxUint64/d {
			return 0, fmt.Errorf("tensor %q: bad dimensions %v", t.Name, t.Dims)
		}
		n *= d
	}
	return n, nil
}

func align(n, a uint64) uint64 { return (n + a - 1) / a * a }

var errShort = errors.New("unexpected end of file")

// reader reads little-endian GGUF values from a byte slice and keeps the
// first error.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.err = errShort
		return nil
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b
}

func (r *reader) u8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) str() string { return string(r.bytes(r.u64())) }

// value reads one metadata value of GGUF type typ.
func (r *reader) value(typ uint32) any {
	switch typ {
	case 0:
		return r.u8()
	case 1:
		return int8(r.u8())
	case 2:
		return r.u16()
	case 3:
		return int16(r.u16())
	case typeUint32:
		return r.u32()
	case typeInt32:
		return int32(r.u32())
	case typeFloat32:
		return math.Float32frombits(r.u32())
	case typeBool:
		switch b := r.u8(); b {
		case 0, 1:
			return b == 1
		default:
			r.fail(fmt.Errorf("bool byte %d", b))
			return nil
		}
	case typeString:
		return r.str()
	case typeArray:
		a := Array{Type: r.u32()}
		n := r.u64()
		if r.err == nil && n > uint64(len(r.b)-r.off) { // every element takes at least a byte
			r.fail(fmt.Errorf("array of %d elements in %d bytes", n, len(r.b)-r.off))
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			a.Values = append(a.Values, r.value(a.Type))
		}
		return a
	case 10:
		return r.u64()
	case 11:
		return int64(r.u64())
	case 12:
		return math.Float64frombits(r.u64())
	default:
		r.fail(fmt.Errorf("unknown value type %d", typ))
		return nil
	}
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
