package engines

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// cloud is a provider for the engines' tests: it speaks converse at its
// own endpoint, its key in x-cloud-key, and needs a zone.
type cloud struct{ zone string }

func (cloud) Name() string { return "cloud" }

func (c cloud) Engine(e *providers.Engine) error {
	if c.zone == "" {
		return errors.New("provider cloud needs its zone")
	}
	if len(e.APIs) == 0 {
		e.APIs = []string{"converse"}
	}
	if e.To == "" {
		e.To = "https://" + c.zone + ".cloud.example"
	}
	if e.KeyHeader == "" {
		e.KeyHeader = "x-cloud-key"
	}
	return nil
}

func (cloud) Target(*url.URL, providers.Request) {}

func TestAProviderSetsItsAPIEndpointAndKeyHeader(t *testing.T) {
	got := Config{Name: "c", Provider: cloud{"z1"}, Models: []string{"m"}}.WithDefaults()
	if strings.Join(got.APIs, " ") != "converse" || got.To != "https://z1.cloud.example" || got.APIKeyHeader != "x-cloud-key" {
		t.Errorf("api %v, to %s, key header %q", got.APIs, got.To, got.APIKeyHeader)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
	if !got.IsProvider() || got.ProviderName() != "cloud" || (&Config{}).ProviderName() != "" {
		t.Errorf("provider %q", got.ProviderName())
	}
	// what the engine says itself wins
	got = Config{Name: "c", Provider: cloud{"z1"}, To: "http://127.0.0.1:9", APIKeyHeader: "Authorization", APIs: []string{"chat"}}.WithDefaults()
	if strings.Join(got.APIs, " ") != "chat" || got.To != "http://127.0.0.1:9" || got.APIKeyHeader != "Authorization" {
		t.Errorf("api %v, to %s, key header %q", got.APIs, got.To, got.APIKeyHeader)
	}
}

func TestAProviderSaysWhatItNeeds(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Name: "c", Provider: cloud{}, Models: []string{"m"}}, "engine c: provider cloud needs its zone"},
		{Config{Name: "c", Provider: cloud{"z1"}, Cmd: []string{"x"}, Models: []string{"m"}}, "has no cmd"},
		{Config{Name: "c", ProviderRaw: json.RawMessage(`{"name":"cloud"}`), To: "http://127.0.0.1:1", Models: []string{"m"}}, "never loaded"},
		{Config{Name: "m", To: "http://127.0.0.1:1", AllowMedia: []string{"gs"}}, "allow_media is for a cloud provider's engine"},
		{Config{Name: "g", Provider: cloud{"z1"}, APIKey: "k", AllowMedia: []string{"gs://"}}, `allow_media takes URL schemes in lower case (gs, http, s3) and file_id, not "gs://"`},
		{Config{Name: "g", Provider: cloud{"z1"}, APIKey: "k", AllowMedia: []string{"GS"}}, `not "GS"`},
	} {
		err := c.cfg.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{Name: "g", Provider: cloud{"z1"}, APIKey: "k", Models: []string{"g"}, AllowMedia: []string{"gs", "s3", "file_id"}}).WithDefaults().Validate(); err != nil {
		t.Errorf("allow_media gs s3 file_id: %v", err)
	}
}

// An engine takes its provider from defaults, as any option it leaves
// unset: its config and the module loaded from it.
func TestAnEngineInheritsItsProvider(t *testing.T) {
	d := Config{ProviderRaw: json.RawMessage(`{"name":"cloud"}`), Provider: cloud{"z1"}}
	got := Config{Name: "c"}.Inherit(d).WithDefaults()
	if got.ProviderName() != "cloud" || string(got.ProviderRaw) != `{"name":"cloud"}` || got.To != "https://z1.cloud.example" {
		t.Errorf("%+v", got)
	}
}
