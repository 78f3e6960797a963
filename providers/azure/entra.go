package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// Microsoft Entra ID credentials (`entra`): a resource that forbids key
// auth takes a bearer token of the Cognitive Services scope, which lives
// about an hour. The credentials are found as Azure's own SDKs find them,
// by azidentity's DefaultAzureCredential: the environment
// (AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET or
// AZURE_CLIENT_CERTIFICATE_PATH), workload identity (AKS), managed identity
// (Azure's machines), then the Azure CLI, the Azure Developer CLI and Azure
// PowerShell. They are found on first use, not at provision: a gateway
// whose credentials are not there yet (a managed identity assigned later,
// `az login` run afterwards) loads, and finds them once they are.

// entraScope is the scope of Azure OpenAI's tokens.
const entraScope = "https://cognitiveservices.azure.com/.default"

// refreshBefore is how long before its expiry a token is replaced when its
// issuer suggested no time (azcore's BearerTokenPolicy waits as long).
const refreshBefore = 5 * time.Minute

// entra is an engine's Entra ID token, held between requests.
//
// Why a cache of our own: the chain's credentials that reach Entra ID (the
// environment's service principal, workload and managed identity) cache
// their tokens in memory through MSAL (AcquireTokenSilent) and give the
// cached one until shortly before it expires, but the developer tools'
// (AzureCLICredential and the others) cache nothing: each GetToken runs
// `az account get-access-token` (azidentity's TOKEN_CACHING.MD, "Credentials
// supporting token caching"). Azure's own clients hold the token in front of
// any credential for that reason (azcore's BearerTokenPolicy); so does this,
// by the same rule: kept until its RefreshOn, or until 5 minutes before its
// ExpiresOn.
type entra struct {
	mu   sync.Mutex
	cred azcore.TokenCredential
	tok  azcore.AccessToken
	// find finds the credential; tests set a fake's.
	find func() (azcore.TokenCredential, error)
	// now is the time tokens are judged by: time.Now unless a test sets
	// its fake credential's clock.
	now func() time.Time
}

// findCredential is DefaultAzureCredential.
func findCredential() (azcore.TokenCredential, error) {
	return azidentity.NewDefaultAzureCredential(nil)
}

// authorize adds the engine's Entra ID token as Authorization: Bearer. An
// error names the failure, never a token or a secret.
func (e *entra) authorize(ctx context.Context, r *http.Request) error {
	tok, err := e.token(ctx)
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// token is the held token while it is fresh, else a new one. A refresh that
// fails while the held token is still valid keeps it (as azcore's policy
// does): Entra ID's hiccup is not the request's failure.
func (e *entra) token(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if e.now != nil {
		now = e.now()
	}
	if e.tok.Token != "" && !stale(e.tok, now) {
		return e.tok.Token, nil
	}
	if e.cred == nil {
		find := e.find
		if find == nil {
			find = findCredential
		}
		cred, err := find()
		if err != nil {
			return "", noCredentials(err)
		}
		e.cred = cred
	}
	tok, err := e.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{entraScope}})
	var refused *azidentity.AuthenticationFailedError
	switch {
	case err != nil && e.tok.Token != "" && now.Before(e.tok.ExpiresOn):
		return e.tok.Token, nil
	case err != nil && !errors.As(err, &refused) && ctx.Err() == nil:
		// every credential of the chain was unavailable: none is there
		// (yet), which is the operator's to fix
		return "", noCredentials(err)
	case err != nil:
		return "", fmt.Errorf("azure: getting a Microsoft Entra ID token: %s", entraError(err))
	case tok.Token == "":
		return "", errors.New("azure: the Microsoft Entra ID credentials gave an empty token")
	}
	e.tok = tok
	return tok.Token, nil
}

// noCredentials is the error of a chain that found no credentials, with
// what it looked for.
func noCredentials(err error) error {
	return fmt.Errorf("azure: no Microsoft Entra ID credentials (set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET, use a workload or managed identity, or run az login): %s", entraError(err))
}

// stale reports whether tok is due for replacement at now.
func stale(tok azcore.AccessToken, now time.Time) bool {
	if !tok.RefreshOn.IsZero() {
		return !now.Before(tok.RefreshOn)
	}
	return !now.Before(tok.ExpiresOn.Add(-refreshBefore))
}

// entraError is err as a client may read it: on one line, and without the
// body of Entra ID's (or the metadata endpoint's) answer, which azidentity
// prints whole in its message and which a log need not hold; its error code
// and status stay.
func entraError(err error) string {
	var af *azidentity.AuthenticationFailedError
	if errors.As(err, &af) && af.RawResponse != nil {
		s := "the token endpoint answered " + af.RawResponse.Status
		if code := errorCode(af.RawResponse); code != "" {
			s += " (" + code + ")"
		}
		return s
	}
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// errorCode is the OAuth error code (invalid_client) of a token endpoint's
// answer, "" when it has none.
func errorCode(resp *http.Response) string {
	body, err := runtime.Payload(resp) // read once and kept: azidentity reads it again
	if err != nil {
		return ""
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	for _, c := range e.Error {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return ""
		}
	}
	return e.Error
}
