package bedrock

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// AWS Bedrock's Converse: an engine's only, no client speaks it.
func init() {
	// No ReadRequest, WriteAnswer or client: only an engine speaks it.
	translate.Register(api.Converse, &translate.Codec{
		WriteRequest: converseWriteRequest,
		ReadAnswer:   converseReadAnswer,
		Decode:       converseDecode,
		Media:        converseMedia,
	})
}

// converseMedia reads a Converse request's media (a body sent in it as
// written, on /upstream/): messages[].content[].{image,document,video}
// .source.s3Location (its uri: an s3: URL). An S3 object is read with the
// operator's AWS credentials: it is a reference like a file id.
func converseMedia(c *translate.MediaCheck, top int) {
	c.Each(top, "messages", func(m int, path string) {
		c.Each(m, "content", func(b int, path string) { converseMediaBlock(c, b, path) }, path)
	}, "")
}

// converseMediaBlock reads a Converse block's image, document or video source:
// an s3Location (its uri) is a reference, bytes are inline.
func converseMediaBlock(c *translate.MediaCheck, b int, path string) {
	c.Members(b, func(name []byte, val, _ int) {
		kind := string(name)
		if kind != "image" && kind != "document" && kind != "video" {
			return
		}
		c.Members(val, func(n []byte, src, _ int) {
			if string(n) != "source" {
				return
			}
			c.Members(src, func(n []byte, loc, _ int) {
				if string(n) != "s3location" {
					return
				}
				member := path + "." + kind + ".source.s3Location"
				found := false
				c.Members(loc, func(n []byte, v, e int) {
					if string(n) == "uri" {
						found = true
						c.URL(v, e, member+".uri")
					}
				})
				if !found {
					c.Refuse(member, "s3")
				}
			})
		})
	})
}
