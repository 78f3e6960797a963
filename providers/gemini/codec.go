package gemini

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Google's generateContent (the Gemini API and Vertex AI): an engine's
// only, no client speaks it.
func init() {
	translate.Register(api.Gemini, &translate.Codec{
		WriteRequest: geminiWriteRequest,
		ReadAnswer:   geminiReadAnswer,
		ReadError:    geminiReadError,
		Decode:       geminiDecode,
		Media:        geminiMedia,
	})
}

// geminiMedia reads a Gemini request's media (a body sent in it as
// written, on /upstream/): contents[].parts[].fileData.fileUri.
func geminiMedia(c *translate.MediaCheck, top int) {
	c.Each(top, "contents", func(m int, path string) {
		c.Each(m, "parts", func(p int, path string) { geminiMediaPart(c, p, path) }, path)
	}, "")
}

// geminiMediaPart reads a Gemini part's fileData.fileUri (Google's JSON takes
// the proto's names too: file_data, file_uri).
func geminiMediaPart(c *translate.MediaCheck, p int, path string) {
	c.Members(p, func(name []byte, val, _ int) {
		if n := string(name); n == "filedata" || n == "file_data" {
			c.Members(val, func(n []byte, v, e int) {
				if u := string(n); u == "fileuri" || u == "file_uri" {
					c.URL(v, e, path+".fileData.fileUri")
				}
			})
		}
	})
}
