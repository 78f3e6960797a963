package statuspage

import "github.com/llmgateway/caddy-llm-gateway/engines"

// linesEvent is one "lines" event of an engine's output: the lines, and
// beside them each line's time (Unix ms) and run (the engine's start that
// printed it), so the page stamps each line and draws a line between runs.
type linesEvent struct {
	Lines []string `json:"lines"`
	At    []int64  `json:"at"`
	Run   []int    `json:"run"`
	Reset bool     `json:"reset"` // the kept lines from the start: the page starts over
}

func timedLines(lines []engines.Line, reset bool) linesEvent {
	ev := linesEvent{Lines: make([]string, len(lines)), At: make([]int64, len(lines)), Run: make([]int, len(lines)), Reset: reset}
	for i, l := range lines {
		ev.Lines[i], ev.At[i], ev.Run[i] = l.Text, l.At.UnixMilli(), l.Run
	}
	return ev
}
