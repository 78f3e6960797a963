package translate

import (
	"fmt"
	"github.com/llmgateway/caddy-llm-gateway/api"
)

// A request is translated in two steps: the client's API is read into one
// neutral representation (rqRequest, request_ir.go), which is then written
// in the engine's API. Each API has one reader and one writer
// (request_chat.go, request_messages.go, request_responses.go), so a rule
// such as "tool ids must match ^[a-zA-Z0-9_-]+$ on Messages" lives in the
// one writer that needs it, whatever the client spoke.
//
// What each member becomes, per direction, is the table in
// docs/translation.md; the comments next to each rule say why.

// Request translates a request body of API from into API to. dropped names
// the client's members that the target cannot carry and that the documented
// rules drop (the gateway logs them and counts them in a metric); err is a
// *Error for a member the target cannot carry that must not be dropped
// silently (the gateway answers 400 naming it and the engine), or another
// error for a body that is not a JSON object. from == to returns body
// unchanged.
func Request(from, to api.API, body []byte, o RequestOptions) (out []byte, dropped []string, err error) {
	if from == to {
		return body, nil, nil
	}
	top, err := rqObject(body)
	if err != nil {
		return nil, nil, err
	}
	r := &rqRequest{from: from, to: to}
	switch from {
	case api.Chat:
		err = rqReadChat(r, top)
	case api.Messages:
		err = rqReadMessages(r, top)
	case api.Responses:
		err = rqReadResponses(r, top)
	default:
		return nil, nil, fmt.Errorf("translating a request from %v: unknown API", from)
	}
	if err != nil {
		return nil, nil, err
	}
	r.pairToolResults()
	switch to {
	case api.Chat:
		out, err = rqWriteChat(r)
	case api.Messages:
		out, err = rqWriteMessages(r, o)
	case api.Responses:
		out, err = rqWriteResponses(r)
	case api.Converse:
		out, err = rqWriteConverse(r, o)
	case api.Gemini:
		out, err = rqWriteGemini(r)
	default:
		return nil, nil, fmt.Errorf("translating a request to %v: unknown API", to)
	}
	if err != nil {
		return nil, nil, err
	}
	return out, r.drops.list, nil
}
