package translate_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func TestStreamDirections(t *testing.T) {
	for _, from := range translatetest.Clients {
		for _, to := range translatetest.Clients {
			if from == to {
				continue
			}
			for scenario := range translatetest.Scenarios {
				t.Run(fmt.Sprintf("%v-%v/%s", from, to, scenario), func(t *testing.T) {
					out := translatetest.Run(t, from, to, translate.StreamOptions{IncludeUsage: true}, translatetest.Capture(t, from, scenario))
					evs := translatetest.Split(t, out)
					got := translatetest.Reassemble(t, to, evs)
					want := translatetest.Expect(scenario, from, to)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("reassembled:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
					}
					if scenario == "error" {
						return // an SDK stops at the error: Reassemble's alone
					}
					want.Thinking, want.Signature = "", ""
					if got := translatetest.ReadSDK(t, to, evs); !reflect.DeepEqual(got, want) {
						t.Errorf("read by the SDK:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
					}
				})
			}
		}
	}
}
