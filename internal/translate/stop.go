package translate

// Stop is why an answer ended, in none of the three APIs' words: each
// reads its own into a Stop and writes a Stop in its own. The table, with
// its sources, is in docs/translation-facts.md#non-streamed-answers:
//
//	Stop          Chat            Messages                        Responses
//	StopEnd       stop            end_turn                        completed
//	StopSequence  stop            stop_sequence                   completed
//	StopLength    length          max_tokens                      incomplete: max_output_tokens
//	StopTool      tool_calls      tool_use                        completed (with function_call items)
//	StopFilter    content_filter  refusal                         incomplete: content_filter
//	StopPause     stop            pause_turn                      completed
//	StopContext   length          model_context_window_exceeded   incomplete: max_output_tokens
//
// StopSequence carries the matched string where an engine names it
// (matched): vLLM's and SGLang's choices[].stop_reason, llama-server's
// __verbose.stopping_word, Messages' stop_sequence (llama-server's beside
// an end_turn). A Messages client gets it as stop_sequence; Chat and
// Responses have no member for it.
type Stop uint8

const (
	StopNone Stop = iota // not said (yet)
	StopEnd
	StopSequence
	StopLength
	StopTool
	StopFilter
	StopPause
	StopContext
)

// maxStopSequence bounds a stop string carried from an engine to a
// Messages client: a stop sequence is a few words, and a longer "match" is
// an engine's mistake that the answer need not repeat.
const maxStopSequence = 1 << 10

// matched is the Stop of an answer that ended with s, when its engine
// named the stop string it matched (named): a plain end becomes the stop
// sequence's, a tool call or a length stays what it is.
func (s Stop) matched(named bool) Stop {
	if named && (s == StopEnd || s == StopNone) {
		return StopSequence
	}
	return s
}

// ChatStop reads a Chat Completions finish_reason.
func ChatStop(s string) Stop {
	switch s {
	case "stop":
		return StopEnd
	case "length":
		return StopLength
	case "tool_calls", "function_call":
		return StopTool
	case "content_filter":
		return StopFilter
	case "":
		return StopNone
	}
	return StopEnd // an engine's own word (llama.cpp's "eos"…) ended the answer
}

// Chat is the finish_reason of s.
func (s Stop) Chat() string {
	switch s {
	case StopLength, StopContext:
		return "length"
	case StopTool:
		return "tool_calls"
	case StopFilter:
		return "content_filter"
	}
	return "stop"
}

// MessagesStop reads a Messages stop_reason.
func MessagesStop(s string) Stop {
	switch s {
	case "end_turn":
		return StopEnd
	case "stop_sequence":
		return StopSequence
	case "max_tokens":
		return StopLength
	case "tool_use":
		return StopTool
	case "refusal":
		return StopFilter
	case "pause_turn":
		return StopPause
	case "model_context_window_exceeded":
		return StopContext
	case "":
		return StopNone
	}
	return StopEnd
}

// Messages is the stop_reason of s.
func (s Stop) Messages() string {
	switch s {
	case StopSequence:
		return "stop_sequence"
	case StopLength:
		return "max_tokens"
	case StopTool:
		return "tool_use"
	case StopFilter:
		return "refusal"
	case StopPause:
		return "pause_turn"
	case StopContext:
		return "model_context_window_exceeded"
	}
	return "end_turn"
}

// ResponsesStop reads a Responses status and incomplete_details.reason;
// tools says whether the output has function_call items (Responses has no
// status of its own for them).
func ResponsesStop(status, reason string, tools bool) Stop {
	switch {
	case status == "incomplete" && reason == "content_filter":
		return StopFilter
	case status == "incomplete":
		return StopLength
	case tools:
		return StopTool
	case status == "completed":
		return StopEnd
	}
	return StopNone
}

// Responses is the status and incomplete_details.reason ("" for none) of
// s.
func (s Stop) Responses() (status, reason string) {
	switch s {
	case StopLength, StopContext:
		return "incomplete", "max_output_tokens"
	case StopFilter:
		return "incomplete", "content_filter"
	}
	return "completed", ""
}
