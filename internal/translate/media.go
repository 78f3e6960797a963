package translate

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Only public or inline media leave for a provider (issue 51). A provider
// fetches what a request names by reference with the operator's
// credentials: a Gemini or Vertex `fileData.fileUri` of
// gs://operator-private-bucket/… is read from Google Cloud Storage as the
// operator, an Anthropic `source.file_id` or an OpenAI `file_id` from the
// operator's Files API. So a request for a provider engine may name media
// only by an https: URL (what anyone may fetch) or inline, as a data: URL
// or base64; any other reference is refused with a 400 naming the member,
// unless the engine allows its kind (`allow_media`). An https: URL on
// Google's API hosts is a file id by another name (a Gemini Files API URI,
// a Cloud Storage object).
//
// The check reads the client's request, in the client's API, so the member
// it names is the client's; every reference is checked, including one that
// translation would drop: the client learns its file was not going to be
// seen. A provider's own API (Gemini, Converse) is read for a body sent in
// it as written (/upstream/). What it reads, per API:
//
//	Chat       messages[].content[]: image_url (a string, or {url}),
//	           video_url, audio_url ({url}, vLLM's), file.file_id
//	Responses  input[].content[] and input[].output[] (a tool's output
//	           parts): image_url, file_url, file_id
//	Messages   messages[].content[] and a tool_result's content[]:
//	           source {type url: url; type file: file_id; type content:
//	           its blocks}, file_id (container_upload)
//	Gemini     contents[].parts[].fileData.fileUri
//	Converse   messages[].content[].{image,document,video}.source.s3Location
//	           (its uri: an s3: URL)
//
// Inline data (base64, file_data, input_audio) is never a reference.

// MediaFileID is what allow_media names a provider's file ids by.
const MediaFileID = "file_id"

// MediaError is a media reference a provider engine may not be sent.
type MediaError struct {
	Member string // the member's path in the client's request, e.g. "messages[0].content[1].image_url.url"
	Kind   string // the reference's kind: its URL scheme ("gs", "http"), "file_id", or "" for no scheme
}

func (e *MediaError) Error() string {
	what := "a " + e.Kind + ": URL"
	switch e.Kind {
	case MediaFileID:
		what = "a file id, which the provider reads from the operator's account"
	case "":
		what = "a reference with no URL scheme"
	}
	return e.Member + " names media by " + what + ": only https: and data: URLs (or inline data) are sent to a provider"
}

// CheckMedia returns a *MediaError for the first media reference in body,
// a request in the client's API a, that is not an https: or data: URL and
// whose kind (URL scheme, lower case, or MediaFileID) allow does not list;
// nil when there is none, and for an API that has no media.
func CheckMedia(a api.API, body []byte, allow []string) error {
	c := MediaCheck{body: body, allow: allow}
	top := jsonmember.SkipSpace(body, 0)
	if cd := codecOf(a); cd != nil && cd.Media != nil {
		cd.Media(&c, top)
	}
	if c.err != nil {
		return c.err
	}
	return nil
}

// MediaCheck walks one request; err is the first refusal.
type MediaCheck struct {
	body    []byte
	allow   []string
	err     *MediaError
	key     []byte // a member name with escapes, read
	scratch []byte // a URL with escapes, read
}

// Each calls fn for every item of the array members named name of the
// object at v (every one: a name given twice is read both times, as
// engines may read either), with the item's path.
func (c *MediaCheck) Each(v int, name string, fn func(item int, path string), path string) {
	for it := jsonmember.Object(c.body, v); c.err == nil; {
		key, val, _, ok := it.Next()
		if !ok {
			return
		}
		if !c.named(key, name) {
			continue
		}
		i := 0
		for items := jsonmember.Array(c.body, val); c.err == nil; i++ {
			_, item, _, ok := items.Next()
			if !ok {
				break
			}
			fn(item, mdPath(path, name, i))
		}
	}
}

// Members calls fn for every member of the object at v with its name
// folded (fold).
func (c *MediaCheck) Members(v int, fn func(name []byte, val, end int)) {
	for it := jsonmember.Object(c.body, v); c.err == nil; {
		key, val, end, ok := it.Next()
		if !ok {
			return
		}
		fn(c.fold(key), val, end)
	}
}

// named reports whether a member's raw name is name, folded.
func (c *MediaCheck) named(key []byte, name string) bool {
	return string(c.fold(key)) == name
}

// fold is a member's raw name as the readers of every engine and of
// translation could take it: escapes read, and case folded as Go's
// encoding/json matches a name (which translation's readers use: a
// "IMAGE_URL" or a "\u017fource" is read as image_url and source), so that
// no spelling names media past the check. Names without escapes, upper
// case or non-ASCII bytes, the usual ones, are returned as they are.
func (c *MediaCheck) fold(key []byte) []byte {
	plain := true
	for _, ch := range key {
		if ch == '\\' || 'A' <= ch && ch <= 'Z' || ch >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return key
	}
	c.key = jsonmember.AppendUnescaped(c.key[:0], key)
	folded := bytes.Map(func(r rune) rune {
		switch r {
		case '\u017f': // ſ, which folds to s
			return 's'
		case '\u212a': // the Kelvin sign, which folds to k
			return 'k'
		}
		return unicode.ToLower(r)
	}, c.key)
	c.key = append(c.key[:0], folded...)
	return c.key
}

// URL checks the string at body[v:end], a media URL.
func (c *MediaCheck) URL(v, end int, member string) {
	raw, ok := jsonmember.Str(c.body, v, end)
	if !ok {
		return // not a string: no reference (the engine refuses it)
	}
	if bytes.IndexByte(raw, '\\') >= 0 {
		c.scratch = jsonmember.AppendUnescaped(c.scratch[:0], raw)
		raw = c.scratch
	}
	scheme := mdScheme(raw)
	if scheme == "https" && mdGoogleHosted(raw) {
		// the Gemini Files API's URIs and Cloud Storage's: Google reads
		// them as the operator
		if !c.Allowed(MediaFileID) {
			c.err = &MediaError{Member: member, Kind: MediaFileID}
		}
		return
	}
	if scheme == "https" || scheme == "data" || c.Allowed(scheme) {
		return
	}
	c.err = &MediaError{Member: member, Kind: scheme}
}

// mdGoogleHosted reports whether an https URL's host is one of Google's
// API hosts (googleapis.com and below): a Gemini Files API URI
// (https://generativelanguage.googleapis.com/v1beta/files/…) or a Cloud
// Storage object, which Gemini and Vertex read with the engine's
// credentials, as a gs:// URI.
func mdGoogleHosted(u []byte) bool {
	u = bytes.TrimLeft(u, " \t\r\n")
	u = u[len("https:"):]
	u = bytes.TrimLeft(u, "/\\")
	if i := bytes.IndexAny(u, "/?#\\"); i >= 0 {
		u = u[:i]
	}
	if i := bytes.LastIndexByte(u, '@'); i >= 0 {
		u = u[i+1:]
	}
	if i := bytes.LastIndexByte(u, ':'); i >= 0 && bytes.IndexByte(u, ']') < i {
		u = u[:i]
	}
	host := strings.TrimRight(strings.ToLower(string(u)), ".")
	return host == "googleapis.com" || strings.HasSuffix(host, ".googleapis.com")
}

// FileID checks a file id member: any string is a reference to the
// provider's files.
func (c *MediaCheck) FileID(v, end int, member string) {
	if raw, ok := jsonmember.Str(c.body, v, end); ok && len(raw) > 0 && !c.Allowed(MediaFileID) {
		c.err = &MediaError{Member: member, Kind: MediaFileID}
	}
}

// Refuse refuses the reference at member, of kind (a URL scheme, or
// MediaFileID), unless the engine allows that kind: for a reference a
// reader found that is not a URL (Converse's s3Location without a uri).
func (c *MediaCheck) Refuse(member, kind string) {
	if c.err == nil && !c.Allowed(kind) {
		c.err = &MediaError{Member: member, Kind: kind}
	}
}

// Body is the request being walked.
func (c *MediaCheck) Body() []byte { return c.body }

// Allowed reports whether the engine allows references of kind.
func (c *MediaCheck) Allowed(kind string) bool {
	for _, a := range c.allow {
		if a == kind {
			return true
		}
	}
	return false
}

// mdScheme is the URL's scheme, lower case, as RFC 3986 spells one
// (a letter, then letters, digits, '+', '-', '.', before ':'); "" for
// none. Leading white space counts: engines and providers trim it.
func mdScheme(u []byte) string {
	u = bytes.TrimLeft(u, " \t\r\n")
	for i, ch := range u {
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z':
		case i > 0 && ('0' <= ch && ch <= '9' || ch == '+' || ch == '-' || ch == '.'):
		case i > 0 && ch == ':':
			return string(bytes.ToLower(u[:i]))
		default:
			return ""
		}
	}
	return ""
}

// mdPath is path.name[i], or name[i] at the top.
func mdPath(path, name string, i int) string {
	if path != "" {
		path += "."
	}
	return path + name + "[" + strconv.Itoa(i) + "]"
}
