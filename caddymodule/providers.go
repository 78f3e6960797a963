package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/providers"

	// The providers built in (docs/providers.md): each registers itself as
	// a Caddy guest module in the providers' namespace. A provider built
	// elsewhere is added with xcaddy build --with, never listed here.
	_ "github.com/llmgateway/caddy-llm-gateway/providers/anthropic"
	_ "github.com/llmgateway/caddy-llm-gateway/providers/azure"
	_ "github.com/llmgateway/caddy-llm-gateway/providers/bedrock"
	_ "github.com/llmgateway/caddy-llm-gateway/providers/gemini"
	_ "github.com/llmgateway/caddy-llm-gateway/providers/openai"
	_ "github.com/llmgateway/caddy-llm-gateway/providers/vertex"
)

// loadProviders loads the provider module of each engine that names one,
// and of the defaults block, as reverse_proxy loads its transport: the
// module is unmarshalled from the engine's "provider" object, provisioned
// and validated. Engines that take their provider from defaults share its
// module once their config inherits it (hconfig.Config.WithDefaults).
func loadProviders(ctx caddy.Context, cfg hconfig.Config) (hconfig.Config, error) {
	for i := range cfg.Engines {
		if err := loadProvider(ctx, &cfg.Engines[i]); err != nil {
			return cfg, fmt.Errorf("engine %s: %v", cfg.Engines[i].Name, err)
		}
	}
	if cfg.Defaults != nil {
		if err := loadProvider(ctx, cfg.Defaults); err != nil {
			return cfg, fmt.Errorf("defaults: %v", err)
		}
	}
	return cfg, nil
}

// loadProvider loads ec's provider module, if it names one. Its JSON stays
// in the config: it is the engine's identity across reloads (the usage
// pool's key) and what the admin API shows of its config; Caddy clears a
// loaded module's JSON.
func loadProvider(ctx caddy.Context, ec *engines.Config) error {
	if len(ec.ProviderRaw) == 0 {
		return nil
	}
	raw := ec.ProviderRaw
	mod, err := ctx.LoadModule(ec, "ProviderRaw")
	ec.ProviderRaw = raw
	if err != nil {
		return fmt.Errorf("loading its provider: %v", err)
	}
	p, ok := mod.(providers.Provider)
	if !ok {
		return fmt.Errorf("module %T in %s is no provider", mod, providers.Namespace)
	}
	ec.Provider = p
	return nil
}
