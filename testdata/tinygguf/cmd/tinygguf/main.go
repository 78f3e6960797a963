// Command tinygguf writes the tiny random-weight llama model (and, with
// -modelfile, an ollama Modelfile for it), for trying the gateway with a
// real engine by hand:
//
//	go run ./testdata/tinygguf/cmd/tinygguf -o /tmp/tiny/tiny.gguf -modelfile /tmp/tiny/Modelfile
//	OLLAMA_HOST=127.0.0.1:11434 ollama create tiny -f /tmp/tiny/Modelfile
//	llama-server -m /tmp/tiny/tiny.gguf --port 8081
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/llmgateway/caddy-llm-gateway/testdata/tinygguf"
)

func main() {
	out := flag.String("o", "tiny.gguf", "where to write the model")
	modelfile := flag.String("modelfile", "", "also write an ollama Modelfile here, whose FROM is the model's absolute path")
	flag.Parse()
	if err := run(*out, *modelfile); err != nil {
		fmt.Fprintln(os.Stderr, "tinygguf:", err)
		os.Exit(1)
	}
}

func run(out, modelfile string) error {
	if err := tinygguf.WriteFile(out); err != nil {
		return err
	}
	if modelfile == "" {
		return nil
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	return os.WriteFile(modelfile, []byte(tinygguf.Modelfile(abs)), 0o644)
}
