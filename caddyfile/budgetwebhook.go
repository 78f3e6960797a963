package caddyfile

import (
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

var budgetWebhookOptions = []string{"timeout", "queue"}

// parseBudgetWebhook parses `budget_webhook <url> [{ timeout <d>; queue <n> }]`.
func parseBudgetWebhook(d *cf.Dispenser) (hconfig.BudgetWebhook, error) {
	var w hconfig.BudgetWebhook
	if !d.AllArgs(&w.URL) {
		return w, d.Errf("budget_webhook takes one URL: where each budget threshold crossing is POSTed")
	}
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := set.once(d); err != nil {
			return w, err
		}
		switch d.Val() {
		case "timeout":
			if err := durationArg(d, &w.Timeout); err != nil {
				return w, err
			}
		case "queue":
			if err := countArg(d, &w.Queue, 1); err != nil {
				return w, err
			}
		default:
			return w, unknownSubdirective(d, "budget_webhook", "", budgetWebhookOptions)
		}
	}
	return w, nil
}
