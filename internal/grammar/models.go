package grammar

import "encoding/json"

// ModelStates reads a model list's per-model status: OpenAI's list shape
// with llama-swap's and llama.cpp router mode's "status": {"value": …}, and
// this gateway's "aliases". A listed model without a status is loaded (the
// engine serves what it lists).
func ModelStates(body []byte) map[string]string {
	var list struct {
		Data []struct {
			ID      string   `json:"id"`
			Aliases []string `json:"aliases"`
			Status  *struct {
				Value string `json:"value"`
			} `json:"status"`
		} `json:"data"`
	}
	states := map[string]string{}
	if json.Unmarshal(body, &list) != nil {
		return states
	}
	for _, m := range list.Data {
		s := "loaded"
		if m.Status != nil {
			switch m.Status.Value {
			case "loading", "unloaded":
				s = m.Status.Value
			case "sleeping": // swap sleep: a request wakes it, sooner than a load
				s = "loading"
			}
		}
		states[m.ID] = s
		for _, a := range m.Aliases {
			// a gateway node lists an engine once, its other names as
			// aliases (list_aliases off): they are the same model
			if _, ok := states[a]; !ok {
				states[a] = s
			}
		}
	}
	return states
}
