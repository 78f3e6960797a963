package handler

import (
	"context"
	"net/http"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// The provider probe: a cloud provider's engine fails for reasons a local
// one has none of: credentials that do not sign or have expired, a model id
// the account cannot use, a region without the model. llm-probe sends each
// such engine a one-token chat completion on its own path (translated into
// the provider's API, signed as its requests are) and says which of them
// failed.

// ProbeProviders probes every engine with a provider: whether its
// credentials work and its model exists.
func (g *Gateway) ProbeProviders(ctx context.Context) []ProbeResult {
	var out []ProbeResult
	for _, rt := range g.routes {
		if rt.provider == nil {
			continue
		}
		model := rt.cfg.ModelName
		if model == "" {
			model = rt.cfg.Models[0]
		}
		body := []byte(`{"model":` + string(jsonmember.AppendString(nil, model)) + `,"messages":[{"role":"user","content":"ping"}],"max_tokens":1}`)
		res, _ := g.probeOnce(ctx, candidate{rt: rt, model: model, role: rolePrimary, acquire: true, label: rt.cfg.Name}, body)
		res.Member = rt.cfg.Name
		switch res.Status {
		case http.StatusUnauthorized, http.StatusForbidden:
			res.Reason = "credentials refused (provider " + rt.cfg.ProviderName() + "): " + res.Reason
		case http.StatusNotFound:
			res.Reason = "no model " + model + " for these credentials (provider " + rt.cfg.ProviderName() + "): " + res.Reason
		}
		out = append(out, res)
	}
	return out
}
