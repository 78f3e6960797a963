package translate

import (
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Anthropic's Messages: Claude Code's, and Anthropic's engines'.
func init() {
	Register(api.Messages, &Codec{
		ReadRequest:  messagesReadRequest,
		WriteRequest: messagesWriteRequest,
		ReadAnswer:   messagesReadAnswer,
		WriteAnswer:  messagesWriteAnswer,
		Decode:       func(s *Stream, dst, _, data []byte) []byte { return s.decodeMessages(dst, data) },
		// A Messages client hears of the answer with its first block (no
		// announce: message_start), hears each block close, and takes
		// tool ids of ^[a-zA-Z0-9_-]+$ only (docs/translation-facts.md#t3).
		client: &client{
			open: (*Stream).messagesOpen, delta: (*Stream).messagesDelta, close: (*Stream).messagesClose,
			finish: (*Stream).messagesFinish, fail: (*Stream).messagesFail,
			toolPrefix: "toolu_", sanitizesIDs: true,
		},
		Media: messagesMedia,
		Paths: map[string]string{"stop": "stop_sequences"},
	})
}

// messagesMedia reads a Messages request's media: messages[].content[]
// and a tool_result's content[]: source {type url: url; type file:
// file_id; type content: its blocks}, file_id (container_upload).
func messagesMedia(c *MediaCheck, top int) {
	c.Each(top, "messages", func(m int, path string) {
		c.Each(m, "content", func(b int, path string) { messagesMediaBlock(c, b, path) }, path)
	}, "")
}

// messagesMediaBlock reads one block's references: its source, a
// container_upload's file_id, and a tool_result's own blocks, which may
// name images too.
func messagesMediaBlock(c *MediaCheck, b int, path string) {
	c.Members(b, func(name []byte, val, end int) {
		switch string(name) {
		case "source":
			messagesMediaSource(c, val, path+".source")
		case "file_id":
			c.FileID(val, end, path+".file_id")
		case "content": // a tool_result's blocks
			i := 0
			for items := jsonmember.Array(c.Body(), val); c.err == nil; i++ {
				_, item, _, ok := items.Next()
				if !ok {
					break
				}
				messagesMediaBlock(c, item, path+".content["+strconv.Itoa(i)+"]")
			}
		}
	})
}

// messagesMediaSource reads a Messages block's source. Every url and file_id member
// is read whatever the source's type says, so that a type engines read
// another way than the gateway (or a type yet to come) hides nothing.
func messagesMediaSource(c *MediaCheck, v int, path string) {
	c.Members(v, func(name []byte, val, end int) {
		switch string(name) {
		case "url":
			c.URL(val, end, path+".url")
		case "file_id":
			c.FileID(val, end, path+".file_id")
		case "content": // a document's own blocks
			i := 0
			for items := jsonmember.Array(c.Body(), val); c.err == nil; i++ {
				_, item, _, ok := items.Next()
				if !ok {
					break
				}
				messagesMediaBlock(c, item, path+".content["+strconv.Itoa(i)+"]")
			}
		}
	})
}
