package providertest

// The secrets of the provider tests: none may show anywhere but on the
// wire to its own provider.
const (
	AnthropicKey = "sk-ant-api03-PVSECRET-anthropic-0001"
	GeminiKey    = "AIzaSyPVSECRET-gemini-key-0002"
	AzureKey     = "pvsecret0azure0key0000000000003"
	// VertexToken is the OAuth access token Vertex's fake takes as Bearer
	// until told another (Fake.SetKey).
	VertexToken = "ya29.pvSECRET-vertex-token-0007"
	// AzureEntraSecret is the client secret of an Azure test's fake
	// Entra ID credential, which no request or error may carry.
	AzureEntraSecret = "pvSECRET~azure~entra~client~secret~0008"
)

// AWSKeys are the Bedrock fake's credentials, in the region it serves.
var AWSKeys = AWS{KeyID: "AKIAPVTESTKEYID00004", Secret: "pvSECRET/aws+secret+access+key/00005",
	Session: "pvSECRET-aws-session-token-00006", Region: "us-east-1"}

// Secrets are the secrets above, for a test to look for where none may
// show: logs, errors, metrics, admin output.
var Secrets = []string{AnthropicKey, GeminiKey, AzureKey, VertexToken, AzureEntraSecret, AWSKeys.Secret, AWSKeys.Session}
