package providers

import "testing"

func TestJoinPath(t *testing.T) {
	for _, c := range [][3]string{
		{"", "/v1/messages", "/v1/messages"},
		{"/", "/v1/messages", "/v1/messages"},
		{"/proxy//", "/model/m/converse", "/proxy/model/m/converse"},
	} {
		if got := JoinPath(c[0], c[1]); got != c[2] {
			t.Errorf("%q %q: %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

// A model between a prefix and a route may hold the separator itself (an
// ARN holds '/' and ':'); an empty model or another route is none.
func TestMethodRoute(t *testing.T) {
	names := []string{"converse", "converse-stream"}
	arn := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-2-1b-instruct-v1:0"
	for _, c := range []struct {
		tail, name, model string
	}{
		{"/model/m/converse", "converse", "m"},
		{"/model/" + arn + "/converse-stream", "converse-stream", arn},
		{"/model//converse", "", ""},
		{"/model/m/invoke", "", ""},
		{"/other/m/converse", "", ""},
	} {
		r, ok := MethodRoute(c.tail, "/model/", "/", names)
		if ok != (c.name != "") || r.Name != c.name || r.Model != c.model {
			t.Errorf("%s: %+v %v", c.tail, r, ok)
		}
	}
}
