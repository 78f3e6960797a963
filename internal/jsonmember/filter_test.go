package jsonmember

import "testing"

func TestNestedFindsAMemberInsideObjectsOnly(t *testing.T) {
	for body, want := range map[string]string{
		`{"metadata":{"user_id":"u1"}}`:                           `"u1"`,
		` {"metadata" : { "a":1, "user_id" : "u2" },"x":[]}`:      `"u2"`,
		`{"metadata":{"user_id":"old"},"metadata":{"user_id":3}}`: `3`,
		`{"metadata":"user_id"}`:                                  ``,
		`{"metadata":["user_id"]}`:                                ``,
		`{"user_id":"u"}`:                                         ``,
		`{"metadata":{}}`:                                         ``,
	} {
		b := []byte(body)
		m := Nested(b, "metadata", "user_id")
		got := ""
		if m.OK() {
			got = string(b[m.Value.Start:m.Value.End])
		}
		if got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}
