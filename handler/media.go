package handler

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Only public or inline media leave for a provider (issue 51): a provider
// fetches what a request names by reference with the operator's
// credentials, so a gs:// URI, a Files API URI or a file id reads the
// operator's bucket or files. Before an attempt of a provider's engine,
// the request's media references are checked (internal/translate's
// CheckMedia, in the client's API, so the member named is the client's):
// one that is not https: or data:, nor a kind the engine's allow_media
// names, keeps the request from that engine (outcomeMedia), and another
// candidate may take it; when none does, the client gets a 400 naming the
// member. An engine without a provider is sent what the client wrote: it
// holds none of the operator's credentials to read it with.

// refusedMedia is the media reference the request may not send to cfg's
// engine, or nil.
func refusedMedia(req *request, cfg *engines.Config) error {
	if !cfg.IsProvider() || !req.json() {
		return nil
	}
	switch a := req.op.api(); a {
	case api.Chat, api.Responses, api.Messages:
		return translate.CheckMedia(a, req.body, cfg.AllowMedia)
	}
	return nil
}

// mediaError is the client's 400 for a refused media reference.
func (a *attempt) mediaError() *apierror.Error {
	cfg := &a.c.rt.cfg
	hint := ""
	var me *translate.MediaError
	if errors.As(a.err, &me) && me.Kind != "" {
		hint = fmt.Sprintf("; the operator may allow it with allow_media %s on the engine", me.Kind)
	}
	return &apierror.Error{Status: http.StatusBadRequest, Type: apierror.TypeInvalidRequest, Code: "media_not_allowed",
		Message: fmt.Sprintf("engine %s (provider %s): %s%s", cfg.Name, cfg.ProviderName(), rootCause(a.err), hint)}
}
