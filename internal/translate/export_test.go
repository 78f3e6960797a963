package translate

import "github.com/llmgateway/caddy-llm-gateway/api"

// What the package's tests read of its unexported names. The tests are
// package translate_test: they check translation with translatetest, as the
// codec tests of the providers' packages do, and translatetest imports this
// package, which a test inside it could not.

// ReadAnswerOf reads an answer of API a as its codec does, unsettled.
func ReadAnswerOf(a api.API, body []byte) (Answer, error) {
	return codecOf(a).ReadAnswer(body, AnswerOptions{})
}

// Settle is settle, which AnswerBody applies after reading.
func (a *Answer) Settle(body []byte) { a.settle(body) }

// Join is the text of a's blocks of kind k.
func (a *Answer) Join(k BlockKind) string { return a.join(k) }

// HeldBlocks is the number of blocks s holds.
func (s *Stream) HeldBlocks() int { return len(s.blocks) }

var (
	ObjectArgs   = objectArgs
	MDScheme     = mdScheme
	FlatName     = flatName
	CustomParams = customParams
)

const (
	MaxErrorMessage = maxErrorMessage
	MaxStopSequence = maxStopSequence
	MaxKept         = maxKept
	MaxBlocks       = maxBlocks
	MaxEventOutput  = maxEventOutput
)
