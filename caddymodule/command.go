package caddymodule

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/llmgateway/caddy-llm-gateway/internal/demoengine"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "llm-demo-engine",
		Usage: "--port <port> [--model <name>] [--load-time <duration>] [--reply <text>]",
		Short: "Runs a tiny OpenAI-compatible demo model server",
		Long: `
Runs a tiny OpenAI-compatible model server (chat completions as JSON and SSE,
completions, embeddings, /v1/models, and a llama-server-like /health) so that
llm_gateway has an engine to start on a machine without a GPU or a model. The
quickstart Caddyfile starts it on demand. Run with -h for every flag.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.DisableFlagParsing = true
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				return demoengine.Run(args)
			}
		},
	})
}
