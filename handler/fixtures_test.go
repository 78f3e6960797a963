package handler

// benchChunk is one chunk of an OpenAI stream as the API sends it.
var benchChunk = []byte(`data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" the quick"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
