package tinygguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// wantSHA256 pins the file: the same bytes on every run, machine and Go
// version. A deliberate change to the model updates it.
const wantSHA256 = "508017a12a926eddae0ced4129774cf192da6f7e11ebb609a570862c4dc4cbc3"

func model(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestWriteIsByteIdenticalOnEveryRun(t *testing.T) {
	first, second := model(t), model(t)
	if !bytes.Equal(first, second) {
		t.Fatal("two runs of Write wrote different bytes")
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if onDisk, err := os.ReadFile(path); err != nil || !bytes.Equal(onDisk, first) {
		t.Fatalf("WriteFile wrote other bytes than Write (%v)", err)
	}
	if len(first) >= 1<<20 {
		t.Fatalf("the model is %d bytes, want well under 1 MiB", len(first))
	}
	sum := sha256.Sum256(first)
	if got := hex.EncodeToString(sum[:]); got != wantSHA256 {
		t.Fatalf("sha256 %s, want %s: the generator's output changed (update wantSHA256 if that is deliberate)", got, wantSHA256)
	}
}

// TestHeaderIsGGUFv3WithItsCounts reads the fixed header by hand, apart from
// Parse: magic, version, tensor count, metadata count.
func TestHeaderIsGGUFv3WithItsCounts(t *testing.T) {
	b := model(t)
	if string(b[:4]) != "GGUF" {
		t.Fatalf("magic %q", b[:4])
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != 3 {
		t.Fatalf("version %d", v)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	wantTensors := 3 + 9*BlockCount
	if n := binary.LittleEndian.Uint64(b[8:]); n != uint64(wantTensors) || len(f.Tensors) != wantTensors {
		t.Fatalf("tensor count %d in the header, %d parsed, want %d", n, len(f.Tensors), wantTensors)
	}
	if n := binary.LittleEndian.Uint64(b[16:]); n != uint64(len(f.Metadata)) || n == 0 {
		t.Fatalf("metadata count %d in the header, %d parsed", n, len(f.Metadata))
	}
}

// TestMetadataHasWhatLlamaCppAndOllamaRead checks every key the loaders read
// for a llama model, with the exact type they check.
func TestMetadataHasWhatLlamaCppAndOllamaRead(t *testing.T) {
	f, err := Parse(model(t))
	if err != nil {
		t.Fatal(err)
	}
	tokens, _, _ := Vocabulary()
	want := map[string]any{
		"general.architecture":                   "llama",
		"general.alignment":                      uint32(32),
		"general.file_type":                      uint32(0),
		"llama.context_length":                   uint32(2048),
		"llama.embedding_length":                 uint32(64),
		"llama.block_count":                      uint32(2),
		"llama.feed_forward_length":              uint32(128),
		"llama.attention.head_count":             uint32(4),
		"llama.attention.head_count_kv":          uint32(4),
		"llama.rope.dimension_count":             uint32(16),
		"llama.rope.freq_base":                   float32(10000),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.vocab_size":                       uint32(len(tokens)),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.bos_token_id":            uint32(1),
		"tokenizer.ggml.eos_token_id":            uint32(4),
		"tokenizer.ggml.unknown_token_id":        uint32(0),
		"tokenizer.ggml.add_bos_token":           true,
		"tokenizer.ggml.add_eos_token":           false,
	}
	for key, w := range want {
		got, ok := f.Get(key)
		if !ok {
			t.Errorf("no %s", key)
			continue
		}
		if got != w {
			t.Errorf("%s = %v (%T), want %v (%T)", key, got, got, w, w)
		}
	}
	tmpl, _ := f.Get("tokenizer.chat_template")
	if s, _ := tmpl.(string); !strings.Contains(s, "<|im_start|>") || !strings.Contains(s, "<|im_end|>") || !strings.Contains(s, "add_generation_prompt") {
		t.Errorf("chat template is not ChatML: %q", tmpl)
	}

	toks := array(t, f, "tokenizer.ggml.tokens", typeString)
	scores := array(t, f, "tokenizer.ggml.scores", typeFloat32)
	types := array(t, f, "tokenizer.ggml.token_type", typeInt32)
	if len(toks) < 300 || len(toks) > 1000 || len(scores) != len(toks) || len(types) != len(toks) {
		t.Fatalf("%d tokens, %d scores, %d types: want a few hundred of each", len(toks), len(scores), len(types))
	}
	// llama.cpp asserts the tokens are unique
	seen := map[string]bool{}
	for i, v := range toks {
		s := v.(string)
		if s == "" || seen[s] {
			t.Fatalf("token %d %q is empty or repeated", i, s)
		}
		seen[s] = true
	}
	for id, w := range map[int]struct {
		text string
		typ  int32
	}{
		0:           {"<unk>", tokenUnknown},
		1:           {"<s>", tokenControl},
		2:           {"</s>", tokenControl},
		3:           {"<|im_start|>", tokenControl},
		4:           {"<|im_end|>", tokenControl},
		5:           {"<0x00>", tokenByte},
		5 + '\n':    {"<0x0A>", tokenByte}, // llama.cpp's SPM newline
		5 + 0xFF:    {"<0xFF>", tokenByte},
		5 + 256:     {"▁", tokenNormal},
		5 + 256 + 1: {"!", tokenNormal},
	} {
		if toks[id] != w.text || types[id] != w.typ {
			t.Errorf("token %d is %q type %v, want %q type %d", id, toks[id], types[id], w.text, w.typ)
		}
	}
	for _, piece := range []string{"a", "~", "▁h", "▁hello", "▁world", "ing"} {
		if !seen[piece] {
			t.Errorf("no piece %q", piece)
		}
	}
}

// array returns an array value whose elements are all of GGUF type typ.
func array(t *testing.T, f *File, key string, typ uint32) []any {
	t.Helper()
	v, ok := f.Get(key)
	a, isArray := v.(Array)
	if !ok || !isArray || a.Type != typ {
		t.Fatalf("%s = %T %v, want an array of type %d", key, v, v, typ)
	}
	return a.Values
}

// TestTensorsHaveLlamasNamesShapesAndAlignedData checks the tensor infos
// against the shapes llama.cpp creates for a llama model, and the data.
func TestTensorsHaveLlamasNamesShapesAndAlignedData(t *testing.T) {
	b := model(t)
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	tokens, _, _ := Vocabulary()
	n := uint64(len(tokens))
	want := map[string][]uint64{
		"token_embd.weight":  {64, n},
		"output_norm.weight": {64},
		"output.weight":      {64, n},
	}
	for i := range BlockCount {
		for name, dims := range map[string][]uint64{
			"attn_norm": {64}, "attn_q": {64, 64}, "attn_k": {64, 64}, "attn_v": {64, 64},
			"attn_output": {64, 64}, "ffn_norm": {64},
			"ffn_gate": {64, 128}, "ffn_up": {64, 128}, "ffn_down": {128, 64},
		} {
			want[fmt.Sprintf("blk.%d.%s.weight", i, name)] = dims
		}
	}
	if len(f.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	var names []string
	total := uint64(0)
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
		dims, ok := want[ti.Name]
		if !ok || !slices.Equal(ti.Dims, dims) {
			t.Errorf("tensor %s has dims %v, want %v", ti.Name, ti.Dims, dims)
		}
		if ti.Type != ggmlF32 {
			t.Errorf("tensor %s has type %d, want F32", ti.Name, ti.Type)
		}
		elems := uint64(1)
		for _, d := range dims {
			elems *= d
		}
		if ti.Size != 4*elems || ti.Offset%Alignment != 0 {
			t.Errorf("tensor %s: %d bytes at offset %d, want %d bytes at a multiple of %d", ti.Name, ti.Size, ti.Offset, 4*elems, Alignment)
		}
		total += ti.Size
		values, err := f.Tensor(b, ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		checkValues(t, ti.Name, values)
	}
	if !slices.Equal(names, TensorNames()) {
		t.Errorf("tensors in file order %v, want %v", names, TensorNames())
	}
	if f.Alignment != Alignment || f.DataOffset%Alignment != 0 {
		t.Fatalf("alignment %d, data at %d", f.Alignment, f.DataOffset)
	}
	// the padding before the data is zeros, and the file is the data's end
	if end := infosEnd(t, b, f); slices.ContainsFunc(b[end:f.DataOffset], func(c byte) bool { return c != 0 }) {
		t.Errorf("non-zero padding between the tensor infos (end %d) and the data (%d)", end, f.DataOffset)
	}
	if got := uint64(len(b)) - f.DataOffset; got < total || got >= total+uint64(len(f.Tensors))*Alignment {
		t.Errorf("%d bytes of data for %d bytes of tensors", got, total)
	}
}

// infosEnd is where the tensor infos end: after the last tensor's name,
// dimension count, dimensions, type and offset.
func infosEnd(t *testing.T, b []byte, f *File) uint64 {
	t.Helper()
	last := f.Tensors[len(f.Tensors)-1]
	var info bytes.Buffer
	binary.Write(&info, binary.LittleEndian, uint64(len(last.Name)))
	info.WriteString(last.Name)
	binary.Write(&info, binary.LittleEndian, uint32(len(last.Dims)))
	binary.Write(&info, binary.LittleEndian, last.Dims)
	binary.Write(&info, binary.LittleEndian, last.Type)
	binary.Write(&info, binary.LittleEndian, last.Offset)
	i := bytes.LastIndex(b[:f.DataOffset], info.Bytes())
	if i < 0 {
		t.Fatalf("the last tensor info is not before the data")
	}
	return uint64(i + info.Len())
}

// checkValues: norms are ones (activations keep their scale), weights are
// small, finite and not all equal.
func checkValues(t *testing.T, name string, values []float32) {
	t.Helper()
	if strings.HasSuffix(name, "norm.weight") {
		if slices.ContainsFunc(values, func(v float32) bool { return v != 1 }) {
			t.Errorf("%s: a norm weight other than 1", name)
		}
		return
	}
	lo, hi := values[0], values[0]
	for _, v := range values {
		if math.IsNaN(float64(v)) || math.Abs(float64(v)) > 0.05 {
			t.Fatalf("%s: value %v", name, v)
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi-lo < 0.05 {
		t.Errorf("%s: values only span [%v, %v]", name, lo, hi)
	}
}

func TestParseRefusesBrokenFiles(t *testing.T) {
	good := model(t)
	for name, edit := range map[string]func([]byte) []byte{
		"truncated":      func(b []byte) []byte { return b[:len(b)-1] },
		"trailing bytes": func(b []byte) []byte { return append(b, 0) },
		"bad magic":      func(b []byte) []byte { b[0] = 'X'; return b },
		"version 2":      func(b []byte) []byte { b[4] = 2; return b },
		"header only":    func(b []byte) []byte { return b[:24] },
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(edit(bytes.Clone(good))); err == nil {
				t.Fatal("parsed")
			}
		})
	}
}

func TestModelfileRegistersTheModelWithChatML(t *testing.T) {
	mf := Modelfile("/models/tiny.gguf")
	for _, want := range []string{
		"FROM /models/tiny.gguf\n",
		"<|im_start|>{{ .Role }}",
		"{{ .Content }}<|im_end|>",
		"<|im_start|>assistant\n\"\"\"",
		`PARAMETER stop "<|im_end|>"`,
		"PARAMETER num_ctx 512",
	} {
		if !strings.Contains(mf, want) {
			t.Errorf("Modelfile lacks %q:\n%s", want, mf)
		}
	}
}
