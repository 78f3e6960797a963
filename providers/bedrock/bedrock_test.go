package bedrock

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// bdModel is a model of Bedrock's that names an inference profile, for
// the paths Target writes.
const bdModel = "us.anthropic.claude-3-5-sonnet-20241022-v2:0"

// bdSend sends body to the fake as the gateway does: Target, Authorize,
// then Events on the answer.
func bdSend(t *testing.T, p *Bedrock, srv *providertest.Fake, model string, stream bool) (*http.Response, io.ReadCloser) {
	t.Helper()
	base, _ := url.Parse(srv.URL)
	u := *base
	p.Target(&u, providers.Request{Base: base, API: api.Converse, Path: "/v1/chat/completions", Model: model, Stream: stream})
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`)
	req, _ := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", "10.0.0.1") // unsigned: a proxy may change it
	if err := p.Authorize(context.Background(), req, body); err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", "10.0.0.2")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, p.Events(resp.Header, resp.Body)
}

func TestBedrockTarget(t *testing.T) {
	p := &Bedrock{Region: "us-east-1"}
	base, _ := url.Parse("https://bedrock-runtime.us-east-1.amazonaws.com/?x=1")
	for model, want := range map[string]string{
		bdModel: "/model/us.anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse-stream",
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-2-1b-instruct-v1:0": "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.meta.llama3-2-1b-instruct-v1%3A0/converse-stream",
	} {
		u := *base
		p.Target(&u, providers.Request{Base: base, API: api.Converse, Path: "/v1/messages", Model: model, Stream: true})
		if u.EscapedPath() != want || u.Path != "/model/"+model+"/converse-stream" || u.RawQuery != "x=1" {
			t.Errorf("%s: %s (path %s)", model, u.String(), u.Path)
		}
	}
}

func TestBedrockSignsWithTheDefaultChain(t *testing.T) {
	providertest.AWSKeys.Env(t)
	srv := providertest.Bedrock(t, "ok")
	p := &Bedrock{Region: "us-east-1"}
	resp, body := bdSend(t, p, srv, providertest.BedrockModel, false)
	b, _ := io.ReadAll(body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"stopReason":"end_turn"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if got := srv.All()[0].Path; got != "/model/"+providertest.BedrockModelPath+"/converse" {
		t.Errorf("path %s", got)
	}
}

func TestBedrockAPIKeyIsNotSigned(t *testing.T) {
	p := &Bedrock{Region: "us-east-1"}
	req, _ := http.NewRequest(http.MethodPost, "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse", nil)
	req.Header.Set("Authorization", "Bearer bedrock-api-key")
	if err := p.Authorize(context.Background(), req, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("Authorization") != "Bearer bedrock-api-key" || req.Header.Get("X-Amz-Date") != "" {
		t.Errorf("headers %v", req.Header)
	}
}

// TestBedrockFakeIsAWSFormat: AWS's own client, bedrockruntime, signs a
// request the fake accepts and reads the fake's stream, so the fake (and
// what Events was tested on) is AWS's wire format, not a copy of ours.
func TestBedrockFakeIsAWSFormat(t *testing.T) {
	keys := providertest.AWSKeys
	keys.Env(t)
	srv := providertest.Bedrock(t, "ok")
	client := bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		HTTPClient:   srv.Client(),
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: keys.KeyID, SecretAccessKey: keys.Secret, SessionToken: keys.Session}, nil
		})),
	})
	out, err := client.ConverseStream(context.Background(), &bedrockruntime.ConverseStreamInput{
		ModelId:  aws.String(providertest.BedrockModel),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Hi"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.All()[0].Path; got != "/model/"+providertest.BedrockModelPath+"/converse-stream" {
		t.Errorf("the SDK's path %s is not the provider's", got)
	}
	stream := out.GetStream()
	defer stream.Close()
	var text string
	var stop types.StopReason
	var usage *types.TokenUsage
	for ev := range stream.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			if d, ok := e.Value.Delta.(*types.ContentBlockDeltaMemberText); ok {
				text += d.Value
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stop = e.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			usage = e.Value.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != providertest.BedrockText || stop != types.StopReasonEndTurn || usage == nil || aws.ToInt32(usage.OutputTokens) != providertest.BedrockOut {
		t.Errorf("text %q stop %q usage %+v", text, stop, usage)
	}
}

// TestBedrockFakeRejectsABadSignature: the fake's check is a check.
func TestBedrockFakeRejectsABadSignature(t *testing.T) {
	keys := providertest.AWSKeys
	keys.Env(t)
	p := &Bedrock{Region: "us-east-1"}
	body := []byte(`{"messages":[]}`)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/model/m/converse", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := p.Authorize(context.Background(), req, body); err != nil {
		t.Fatal(err)
	}
	if err := keys.VerifySigV4(req, body, "bedrock"); err != nil {
		t.Fatalf("the signed request: %v", err)
	}
	if keys.VerifySigV4(req, []byte(`{"messages":[1]}`), "bedrock") == nil {
		t.Error("another body passed")
	}
	req.Header.Set("Content-Type", "text/plain")
	if keys.VerifySigV4(req, body, "bedrock") == nil {
		t.Error("another signed header passed")
	}
}

func TestBedrockSetsItsAPIAndRegionsEndpoint(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	var e providers.Engine
	if err := (&Bedrock{Region: "eu-west-1"}).Engine(&e); err != nil || e.To != "https://bedrock-runtime.eu-west-1.amazonaws.com" || strings.Join(e.APIs, " ") != "converse" || e.KeyHeader != "" {
		t.Fatalf("%+v %v", e, err)
	}
	e = providers.Engine{}
	if err := new(Bedrock).Engine(&e); err == nil || !strings.Contains(err.Error(), "needs its region") {
		t.Fatalf("without a region: %v", err)
	}
	t.Setenv("AWS_DEFAULT_REGION", "ap-south-1")
	t.Setenv("AWS_REGION", "us-west-2")
	p := new(Bedrock)
	if err := p.Engine(&e); err != nil || !strings.Contains(e.To, "us-west-2") || p.Where() != "us-west-2" {
		t.Fatalf("AWS_REGION: %+v %v, where %q", e, err, p.Where())
	}
	if err := p.Provision(caddy.Context{}); err != nil || p.Region != "us-west-2" {
		t.Fatalf("provisioned: %q %v", p.Region, err)
	}
}

func TestBedrockCaddyfile(t *testing.T) {
	var p Bedrock
	if err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser("bedrock {\n region eu-central-1\n}")); err != nil || p.Region != "eu-central-1" {
		t.Fatalf("%+v %v", p.Region, err)
	}
	if err := new(Bedrock).UnmarshalCaddyfile(caddyfile.NewTestDispenser("bedrock extra")); err == nil {
		t.Fatal("an argument it does not take")
	}
}

// A model's own failure (424 ModelErrorException) is a 500 to the failure
// table: retry, move on; Bedrock's other statuses are the table's own.
func TestBedrockReadsAModelErrorAsA500(t *testing.T) {
	for status, want := range map[int]int{424: 500, 429: 429, 503: 503, 400: 400} {
		f := &providers.Failure{Status: status, Header: http.Header{"X-Amzn-Errortype": {"ModelErrorException"}}}
		new(Bedrock).ReadFailure(f)
		if f.Status != want {
			t.Errorf("%d read as %d, want %d", status, f.Status, want)
		}
	}
}
