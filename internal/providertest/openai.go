package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// OpenAI's Chat Completions as OpenAI reads a request
// (https://platform.openai.com/docs/api-reference/chat/create): what it
// refuses, and its error's shape. Azure OpenAI's deployments take the same
// request, so the Azure fake holds it to these rules, and so do the tests'
// own Chat-only engines.

// chatMembers are Chat Completions' request members: OpenAI answers 400
// "Unrecognized request argument" to any other.
var chatMembers = []string{"messages", "model", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
	"logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
	"presence_penalty", "prompt_cache_key", "prompt_cache_retention", "reasoning_effort", "response_format",
	"safety_identifier", "seed", "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice",
	"tools", "top_logprobs", "top_p", "user", "verbosity", "web_search_options"}

// ChatToolCall is a call in an assistant message's tool_calls.
type ChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatMessage is one of a Chat request's messages.
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []ChatToolCall  `json:"tool_calls"`
}

// ChatRequest is the part of a Chat request the fakes read.
type ChatRequest struct {
	Model    string        `json:"model"`
	Messages []ChatMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// OpenAIError answers an error in OpenAI's shape.
func OpenAIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	w.Write(b)
}

// CheckChat is what OpenAI would refuse in a Chat request, or "".
func CheckChat(body []byte, req *ChatRequest) string {
	if err := json.Unmarshal(body, req); err != nil {
		return "We could not parse the JSON body of your request: " + err.Error()
	}
	if u := UnknownMembers(body, chatMembers...); len(u) > 0 {
		return "Unrecognized request argument supplied: " + strings.Join(u, ", ")
	}
	if req.Model == "" || len(req.Messages) == 0 {
		return "you must provide a model and at least one message"
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Sprintf("Invalid value at tools[%d]: a function tool with a name", i)
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', 'developer'", m.Role)
		}
		if m.Role == "tool" {
			// a tool message answers a call of the assistant message before
			// the run of tool messages it is in
			j := i - 1
			for j >= 0 && req.Messages[j].Role == "tool" {
				j--
			}
			if j < 0 || !slices.ContainsFunc(req.Messages[j].ToolCalls, func(c ChatToolCall) bool { return c.ID == m.ToolCallID }) {
				return fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages[%d], tool_call_id %q)", i, m.ToolCallID)
			}
		}
		for _, c := range m.ToolCalls {
			answered := false
			for _, n := range req.Messages[i+1:] {
				if n.Role != "tool" {
					break
				}
				answered = answered || n.ToolCallID == c.ID
			}
			if !answered || c.Type != "function" || !json.Valid([]byte(c.Function.Arguments)) {
				return fmt.Sprintf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", c.ID)
			}
		}
	}
	return ""
}
