package providertest

import (
	"fmt"
	"net/http"
	"testing"
)

// Azure OpenAI's data plane
// (https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference):
// OpenAI's Chat Completions (openai.go's rules) at a deployment's path.

// What the Azure fake answers, and the usage it reports.
const (
	AzureDeployment = "gpt-4o"
	AzureAPIVersion = "2024-10-21"
	AzureText       = "Hello from Azure."
	AzureIn         = 10
	AzureOut        = 3
)

// Azure is an Azure OpenAI resource's deployments API: the deployment
// in the path, api-version in the query, the key (AzureKey) in api-key, or
// a Microsoft Entra ID token as Authorization: Bearer (the key the fake is
// told: Fake.SetKey), never both. Its streams
// open with a chunk of prompt filter results and no choices, as Azure's
// do. Modes: ok, cached, filtered (400 content_filter), throttled (429 with
// retry-after).
func Azure(t testing.TB, mode string) *Fake {
	return newFake(t, mode, AzureKey, func(f *Fake, w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/openai/deployments/"+AzureDeployment+"/chat/completions" {
			f.refuse("path %s", r.URL.Path)
			writeJSON(w, 404, `{"error":{"code":"404","message":"Resource not found"}}`)
			return
		}
		if r.URL.Query().Get("api-version") != AzureAPIVersion {
			f.refuse("query %s", r.URL.RawQuery)
			writeJSON(w, 404, `{"error":{"code":"404","message":"Resource not found"}}`)
			return
		}
		key, bearer := r.Header.Get("Api-Key"), r.Header.Get("Authorization")
		if !(key == f.getKey() && bearer == "" || key == "" && bearer == "Bearer "+f.getKey()) {
			f.refuse("api-key %q, Authorization %q", key, bearer)
			writeJSON(w, 401, `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint."}}`)
			return
		}
		var req ChatRequest
		if msg := CheckChat(body, &req); msg != "" {
			f.refuse("%s: %s", msg, body)
			OpenAIError(w, 400, "invalid_request_error", msg)
			return
		}
		switch f.Mode() {
		case "filtered":
			writeJSON(w, 400, `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"high"}}}}}`)
			return
		case "throttled":
			w.Header().Set("Retry-After", "30")
			writeJSON(w, 429, `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 30 seconds."}}`)
			return
		}
		filters := `"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}`
		usage := fmt.Sprintf(`{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d}`, AzureOut, AzureIn, AzureIn+AzureOut)
		if f.Mode() == "cached" {
			usage = fmt.Sprintf(`{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`, cachedOut, cachedIn, cachedIn+cachedOut, cachedRead)
		}
		if !req.Stream {
			writeJSON(w, 200, fmt.Sprintf(`{"choices":[{%s,"finish_reason":"stop","index":0,"logprobs":null,"message":{"content":%q,"refusal":null,"role":"assistant"}}],"created":1730000000,"id":"chatcmpl-PvAzure","model":"gpt-4o-2024-08-06","object":"chat.completion","prompt_filter_results":[{"prompt_index":0,%s}],"system_fingerprint":"fp_pv","usage":%s}`,
				filters, AzureText, filters, usage))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		data := func(s string) { fmt.Fprintf(w, "data: %s\n\n", s) }
		data(fmt.Sprintf(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,%s}]}`, filters))
		chunk := func(delta, finish, u string) {
			data(fmt.Sprintf(`{"choices":[{"content_filter_results":{},"delta":%s,"finish_reason":%s,"index":0,"logprobs":null}],"created":1730000000,"id":"chatcmpl-PvAzure","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_pv","usage":%s}`, delta, finish, u))
		}
		chunk(`{"content":"","refusal":null,"role":"assistant"}`, "null", "null")
		for _, word := range words(AzureText) {
			chunk(fmt.Sprintf(`{"content":%q}`, word), "null", "null")
		}
		chunk(`{}`, `"stop"`, "null")
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			data(fmt.Sprintf(`{"choices":[],"created":1730000000,"id":"chatcmpl-PvAzure","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_pv","usage":%s}`, usage))
		}
		data("[DONE]")
	})
}
