package translate

import "github.com/llmgateway/caddy-llm-gateway/api"

// AWS Bedrock's Converse: an engine's only, no client speaks it.
func init() {
	Register(api.Converse, &Codec{
		WriteRequest: converseWriteRequest,
		ReadAnswer:   converseReadAnswer,
	})
}
