package grammar

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// AnswerUsage reads the usage a JSON answer of API a reports, by a's own
// rule (package api): its top-level usage member. It decodes nothing
// else.
func AnswerUsage(a api.API, doc []byte) (api.Usage, bool) {
	f, err := jsonmember.ScanAnswer(doc)
	if err != nil {
		return api.Usage{}, false
	}
	return usageAt(a, doc, f.Usage)
}

// usageAt reads the usage member m of doc, an object of API a.
func usageAt(a api.API, doc []byte, m jsonmember.Member) (api.Usage, bool) {
	if !m.OK() {
		return api.Usage{}, false
	}
	return a.ReadUsage(doc, m.Value.Start)
}
