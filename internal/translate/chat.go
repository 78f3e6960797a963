package translate

import "github.com/llmgateway/caddy-llm-gateway/api"

// OpenAI's Chat Completions: the API most engines speak, and the one a
// translation prefers (api.Preference).
func init() {
	Register(api.Chat, &Codec{
		ReadRequest:  chatReadRequest,
		WriteRequest: chatWriteRequest,
		ReadAnswer:   chatReadAnswer,
		WriteAnswer:  chatWriteAnswer,
		Decode:       func(s *Stream, dst, _, data []byte) []byte { return s.decodeChat(dst, data) },
		// A Chat client hears of the answer at its start (the role chunk),
		// has no word for a block's end (no close), and numbers tool calls
		// among tool calls only (docs/translation-facts.md#t7).
		client: &client{
			announce: (*Stream).chatAnnounce, open: (*Stream).chatOpen, delta: (*Stream).chatDelta,
			finish: (*Stream).chatFinish, fail: (*Stream).chatFail,
			toolPrefix: "call_", countsTools: true,
		},
		Media: chatMedia,
	})
}

// chatMedia reads a Chat request's media: messages[].content[]:
// image_url (a string, or {url}), video_url, audio_url ({url}, vLLM's),
// file.file_id.
func chatMedia(c *MediaCheck, top int) {
	c.Each(top, "messages", func(m int, path string) {
		c.Each(m, "content", func(p int, path string) { chatMediaPart(c, p, path) }, path)
	}, "")
}

// chatMediaPart reads one content part's references. A URL member may be
// the URL itself or an object holding it, as chatImageURL reads both: the
// check must see every spelling an engine would fetch.
func chatMediaPart(c *MediaCheck, p int, path string) {
	c.Members(p, func(name []byte, val, end int) {
		switch string(name) {
		case "image_url", "video_url", "audio_url":
			member := path + "." + string(name)
			if c.Body()[val] == '"' {
				c.URL(val, end, member)
				return
			}
			c.Members(val, func(n []byte, v, e int) {
				if string(n) == "url" {
					c.URL(v, e, member+".url")
				}
			})
		case "file":
			c.Members(val, func(n []byte, v, e int) {
				if string(n) == "file_id" {
					c.FileID(v, e, path+".file.file_id")
				}
			})
		}
	})
}
