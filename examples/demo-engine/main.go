// Command demo-engine runs the gateway's tiny demo model server on its own,
// without Caddy: `go run ./examples/demo-engine --port 9000`. The gateway's
// binary has the same server as `caddy llm-demo-engine`; see
// internal/demoengine for what it answers and its flags.
package main

import (
	"fmt"
	"os"

	"github.com/llmgateway/caddy-llm-gateway/internal/demoengine"
)

func main() {
	if err := demoengine.Run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "demo-engine:", err)
		os.Exit(1)
	}
}
