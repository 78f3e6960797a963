package grammar

import "encoding/json"

// AnswerText is the text of a JSON answer: a chat completion's first
// choice's message, a completion's text, an Anthropic message's text
// blocks, a Responses API answer's output text; nil for none.
func AnswerText(body []byte) []byte {
	var a struct {
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if json.Unmarshal(body, &a) != nil {
		return nil
	}
	var text []byte
	if len(a.Choices) > 0 {
		text = append(text, a.Choices[0].Message.Content...)
		text = append(text, a.Choices[0].Text...)
	}
	for _, c := range a.Content {
		text = append(text, c.Text...)
	}
	for _, o := range a.Output {
		for _, c := range o.Content {
			text = append(text, c.Text...)
		}
	}
	return text
}
