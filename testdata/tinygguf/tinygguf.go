// Package tinygguf writes a tiny random-weight llama model as a GGUF v3 file,
// so that tests and examples can run a real model server (ollama,
// llama.cpp's llama-server) without downloading a model.
//
// The model is architecture llama with F32 tensors: embedding 64, 2 blocks,
// 4 heads, feed-forward 128, context 2048, and a SentencePiece-style
// ("llama") vocabulary of a few hundred tokens with a ChatML chat template
// whose end of turn, <|im_end|>, is the end-of-sequence token. Its weights
// come from a fixed-seed generator, so every run writes the same bytes
// (about 0.5 MB). The text it generates is garbage: tests assert structure,
// never content.
//
// The format follows ggml's docs/gguf.md; the keys and tensor shapes are
// those llama.cpp's loader (llama-model.cpp, llama-vocab.cpp) and ollama's
// GGUF reader (fs/ggml) require for the llama architecture, with the value
// types they check (counts are uint32, epsilons float32, token types int32).
//
// The package lives under testdata so that it is never part of the module's
// public surface; name it explicitly to build, vet or test it
// (`go test ./testdata/tinygguf`), since `./...` skips testdata.
package tinygguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// The model's shape.
const (
	EmbeddingLength   = 64
	BlockCount        = 2
	HeadCount         = 4
	HeadCountKV       = 4
	FeedForwardLength = 128
	ContextLength     = 2048
	// RopeDimensionCount is the head size: llama.cpp refuses a llama model
	// whose rope.dimension_count is not embedding_length/head_count.
	RopeDimensionCount = EmbeddingLength / HeadCount
	RMSEpsilon         = 1e-5
	RopeFreqBase       = 10000
	// Alignment is general.alignment: the tensor data and every tensor in
	// it start at a multiple of it.
	Alignment = 32
)

// Special tokens, by id.
const (
	UnknownID = 0 // <unk>
	BOSID     = 1 // <s>
	ImStartID = 3 // <|im_start|>
	EOSID     = 4 // <|im_end|>: a ChatML turn ends the answer
)

// ChatTemplate is ChatML as a Jinja template, the tokenizer.chat_template
// llama-server applies; its newlines are Jinja escapes, as in the templates
// of real ChatML models. ollama does not read it: its Modelfile carries the
// same template in Go syntax (see Modelfile).
const ChatTemplate = "{% for message in messages %}" +
	`{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}` +
	"{% endfor %}" +
	`{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`

// seed fixes the weights: the file is byte-identical on every run.
const seed = 0x7469_6e79_6767_7566 // "tinygguf"

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
const (
	tokenNormal  int32 = 1
	tokenUnknown int32 = 2
	tokenControl int32 = 3
	tokenByte    int32 = 6
)

// GGUF metadata value types (gguf_metadata_value_type).
const (
	typeUint32  uint32 = 4
	typeInt32   uint32 = 5
	typeFloat32 uint32 = 6
	typeBool    uint32 = 7
	typeString  uint32 = 8
	typeArray   uint32 = 9
)

// ggmlF32 is GGML_TYPE_F32, the type of every tensor here.
const ggmlF32 uint32 = 0

// words are whole-word pieces; each is added with every prefix of two or
// more runes, so SentencePiece's pairwise merges can reach it.
var words = []string{
	"▁the", "▁a", "▁is", "▁I", "▁you", "▁hello", "▁world", "▁tiny", "▁model",
	"▁gateway", "▁engine", "▁answer", "▁ok", "ing", "ed", "er",
}

// Vocabulary is the model's tokens with their SentencePiece scores and
// types, in id order.
func Vocabulary() (tokens []string, scores []float32, types []int32) {
	seen := map[string]bool{}
	add := func(tok string, score float32, typ int32) {
		if seen[tok] {
			return
		}
		seen[tok] = true
		tokens = append(tokens, tok)
		scores = append(scores, score)
		types = append(types, typ)
	}
	add("<unk>", 0, tokenUnknown)
	add("<s>", 0, tokenControl)
	add("</s>", 0, tokenControl)
	add("<|im_start|>", 0, tokenControl)
	add("<|im_end|>", 0, tokenControl)
	// byte fallback: llama.cpp finds the newline as <0x0A>, upper-case hex
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), 0, tokenByte)
	}
	// ordinary pieces score lower the later they come, as in a trained
	// SentencePiece model where the id follows frequency
	normal := func(tok string) { add(tok, -float32(len(tokens)), tokenNormal) }
	normal("▁")
	for c := byte('!'); c <= '~'; c++ {
		normal(string(c))
	}
	for _, w := range words {
		r := []rune(w)
		for n := 2; n <= len(r); n++ {
			normal(string(r[:n]))
		}
	}
	return tokens, scores, types
}

// Modelfile is an ollama Modelfile that registers the model at ggufPath
// (`ollama create tiny -f Modelfile`): ChatML in ollama's template syntax,
// <|im_end|> as the stop sequence and a small context so it loads fast.
func Modelfile(ggufPath string) string {
	return "FROM " + ggufPath + "\n" +
		`TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
"""
PARAMETER stop "<|im_end|>"
PARAMETER num_ctx 512
`
}

// WriteFile writes the model to path.
func WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// Write writes the model as GGUF v3 to w, always the same bytes.
func Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	g := &writer{w: bw}
	tokens, scores, types := Vocabulary()
	tensors := layout(len(tokens))

	// header: magic, version, tensor count, metadata count
	g.raw([]byte("GGUF"))
	g.u32(3)
	kvs := metadata(tokens, scores, types)
	g.u64(uint64(len(tensors)))
	g.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		g.str(kv.key)
		kv.write(g)
	}

	// tensor infos: offsets are relative to the start of the tensor data,
	// each aligned, in file order
	var offset uint64
	for _, t := range tensors {
		g.str(t.name)
		g.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			g.u64(d)
		}
		g.u32(ggmlF32)
		g.u64(offset)
		offset += padded(t.bytes())
	}
	g.pad()

	// tensor data, each tensor padded to the alignment
	rng := splitmix64(seed)
	for _, t := range tensors {
		for range t.elements() {
			g.f32(t.value(&rng))
		}
		g.pad()
	}
	if g.err != nil {
		return g.err
	}
	return bw.Flush()
}

// kv is one metadata pair, its value already typed for the file.
type kv struct {
	key   string
	write func(*writer)
}

func u32KV(key string, v uint32) kv {
	return kv{key, func(g *writer) { g.u32(typeUint32); g.u32(v) }}
}

func f32KV(key string, v float32) kv {
	return kv{key, func(g *writer) { g.u32(typeFloat32); g.f32(v) }}
}

func boolKV(key string, v bool) kv {
	return kv{key, func(g *writer) {
		g.u32(typeBool)
		if v {
			g.raw([]byte{1})
		} else {
			g.raw([]byte{0})
		}
	}}
}

func strKV(key, v string) kv {
	return kv{key, func(g *writer) { g.u32(typeString); g.str(v) }}
}

// metadata is every key the model carries, in file order.
func metadata(tokens []string, scores []float32, types []int32) []kv {
	return []kv{
		strKV("general.architecture", "llama"),
		strKV("general.name", "tiny"),
		u32KV("general.alignment", Alignment),
		u32KV("general.file_type", 0), // ALL_F32
		u32KV("llama.context_length", ContextLength),
		u32KV("llama.embedding_length", EmbeddingLength),
		u32KV("llama.block_count", BlockCount),
		u32KV("llama.feed_forward_length", FeedForwardLength),
		u32KV("llama.attention.head_count", HeadCount),
		u32KV("llama.attention.head_count_kv", HeadCountKV),
		u32KV("llama.rope.dimension_count", RopeDimensionCount),
		f32KV("llama.rope.freq_base", RopeFreqBase), // ollama's engine would default to 1e5
		f32KV("llama.attention.layer_norm_rms_epsilon", RMSEpsilon),
		u32KV("llama.vocab_size", uint32(len(tokens))),
		strKV("tokenizer.ggml.model", "llama"),
		{"tokenizer.ggml.tokens", func(g *writer) {
			g.u32(typeArray)
			g.u32(typeString)
			g.u64(uint64(len(tokens)))
			for _, t := range tokens {
				g.str(t)
			}
		}},
		{"tokenizer.ggml.scores", func(g *writer) {
			g.u32(typeArray)
			g.u32(typeFloat32)
			g.u64(uint64(len(scores)))
			for _, s := range scores {
				g.f32(s)
			}
		}},
		{"tokenizer.ggml.token_type", func(g *writer) {
			g.u32(typeArray)
			g.u32(typeInt32)
			g.u64(uint64(len(types)))
			for _, t := range types {
				g.u32(uint32(t))
			}
		}},
		u32KV("tokenizer.ggml.bos_token_id", BOSID),
		u32KV("tokenizer.ggml.eos_token_id", EOSID),
		u32KV("tokenizer.ggml.unknown_token_id", UnknownID),
		boolKV("tokenizer.ggml.add_bos_token", true),
		boolKV("tokenizer.ggml.add_eos_token", false),
		strKV("tokenizer.chat_template", ChatTemplate),
	}
}

// tensor is one weight: its name, its dimensions (ggml order: the first
// is the row length) and how its values are made.
type tensor struct {
	name string
	dims []uint64
	norm bool // an RMS-norm weight: all ones, so activations keep their scale
}

func (t tensor) elements() uint64 {
	n := uint64(1)
	for _, d := range t.dims {
		n *= d
	}
	return n
}

func (t tensor) bytes() uint64 { return 4 * t.elements() }

// value is the tensor's next value: small uniform noise keeps the logits
// near zero and finite, so sampling is near-uniform over the vocabulary.
func (t tensor) value(rng *splitmix64) float32 {
	if t.norm {
		return 1
	}
	return float32(rng.float64()*2-1) * 0.05
}

// layout is the model's tensors, in file order, with the names and shapes
// llama.cpp creates for LLM_ARCH_LLAMA.
func layout(vocab int) []tensor {
	const embd, ff = EmbeddingLength, FeedForwardLength
	headDim := uint64(RopeDimensionCount)
	q := headDim * HeadCount
	kvDim := headDim * HeadCountKV
	n := uint64(vocab)
	ts := []tensor{
		{name: "token_embd.weight", dims: []uint64{embd, n}},
		{name: "output_norm.weight", dims: []uint64{embd}, norm: true},
		{name: "output.weight", dims: []uint64{embd, n}},
	}
	for i := range BlockCount {
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", i, s) }
		ts = append(ts,
			tensor{name: blk("attn_norm"), dims: []uint64{embd}, norm: true},
			tensor{name: blk("attn_q"), dims: []uint64{embd, q}},
			tensor{name: blk("attn_k"), dims: []uint64{embd, kvDim}},
			tensor{name: blk("attn_v"), dims: []uint64{embd, kvDim}},
			tensor{name: blk("attn_output"), dims: []uint64{q, embd}},
			tensor{name: blk("ffn_norm"), dims: []uint64{embd}, norm: true},
			tensor{name: blk("ffn_gate"), dims: []uint64{embd, ff}},
			tensor{name: blk("ffn_up"), dims: []uint64{embd, ff}},
			tensor{name: blk("ffn_down"), dims: []uint64{ff, embd}},
		)
	}
	return ts
}

// TensorNames are the names of the model's tensors, in file order.
func TensorNames() []string {
	tokens, _, _ := Vocabulary()
	var names []string
	for _, t := range layout(len(tokens)) {
		names = append(names, t.name)
	}
	return names
}

func padded(n uint64) uint64 { return (n + Alignment - 1) / Alignment * Alignment }

// writer writes little-endian GGUF values and keeps the first error, so
// Write reads as the layout it produces.
type writer struct {
	w   io.Writer
	n   uint64 // bytes written, for padding
	err error
	buf [8]byte
}

func (g *writer) raw(b []byte) {
	if g.err != nil {
		return
	}
	var n int
	n, g.err = g.w.Write(b)
	g.n += uint64(n)
}

func (g *writer) u32(v uint32) {
	binary.LittleEndian.PutUint32(g.buf[:4], v)
	g.raw(g.buf[:4])
}

func (g *writer) u64(v uint64) {
	binary.LittleEndian.PutUint64(g.buf[:8], v)
	g.raw(g.buf[:8])
}

func (g *writer) f32(v float32) { g.u32(math.Float32bits(v)) }

// str writes a GGUF string: its byte length as uint64, then its bytes.
func (g *writer) str(s string) {
	g.u64(uint64(len(s)))
	g.raw([]byte(s))
}

// pad writes zeros up to the next multiple of Alignment.
func (g *writer) pad() {
	g.raw(make([]byte, padded(g.n)-g.n))
}

// splitmix64 is a tiny PRNG with a fixed definition, so the weights never
// change with the Go version (math/rand/v2 makes no such promise for its
// derived distributions).
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 is uniform in [0, 1).
func (s *splitmix64) float64() float64 { return float64(s.next()>>11) / (1 << 53) }
