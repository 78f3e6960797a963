package engines

import "encoding/json"

// About describes an engine's models for people choosing one, as
// llama-swap's name, description and metadata do: /v1/models carries it
// beside each of the engine's models (name, description, metadata) and the
// status page shows it. It says nothing about what runs, so a reload that
// changes only it keeps the engine's process.
type About struct {
	// DisplayName is the models' name for people ("Qwen3 30B A3B").
	// Default: none (clients show the id).
	DisplayName string `json:"display_name,omitempty"`

	// Description is a sentence about the models. Default: none.
	Description string `json:"description,omitempty"`

	// Metadata are free JSON values by name (context length, vendor,
	// capabilities), passed through as given. Default: none.
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
}
