package translate

import "github.com/llmgateway/caddy-llm-gateway/api"

// OpenAI's Responses: Codex's.
func init() {
	Register(api.Responses, &Codec{
		ReadRequest:  responsesReadRequest,
		WriteRequest: responsesWriteRequest,
		ReadAnswer:   responsesReadAnswer,
		WriteAnswer:  responsesWriteAnswer,
		Decode:       func(s *Stream, dst, _, data []byte) []byte { return s.decodeResponses(dst, data) },
		// A Responses client hears of the answer with its first block
		// (response.created goes with it), and its closing events repeat
		// each block whole, so its Stream keeps them (keepsBlocks).
		client: &client{
			open: (*Stream).respOpen, delta: (*Stream).respDelta, close: (*Stream).respClose,
			finish: (*Stream).respFinish, fail: (*Stream).respFail,
			toolPrefix: "call_", keepsBlocks: true,
		},
		Media: responsesMedia,
		// Chat's verbosity is text.verbosity here, so a drop names it so.
		Paths: map[string]string{"verbosity": "text.verbosity"},
	})
}

// responsesMedia reads a Responses request's media: input[].content[] and
// input[].output[] (a tool's output parts): image_url, file_url, file_id.
func responsesMedia(c *MediaCheck, top int) {
	c.Each(top, "input", func(item int, path string) {
		c.Each(item, "content", func(p int, path string) { responsesMediaPart(c, p, path) }, path)
		c.Each(item, "output", func(p int, path string) { responsesMediaPart(c, p, path) }, path)
	}, "")
}

// responsesMediaPart reads one part's references: an image or a file by
// URL, or by a file id of OpenAI's Files API.
func responsesMediaPart(c *MediaCheck, p int, path string) {
	c.Members(p, func(name []byte, val, end int) {
		switch string(name) {
		case "image_url", "file_url":
			c.URL(val, end, path+"."+string(name))
		case "file_id":
			c.FileID(val, end, path+".file_id")
		}
	})
}
