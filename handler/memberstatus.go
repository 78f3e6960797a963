package handler

// MemberStatus is one pool member's state.
type MemberStatus struct {
	Member  string `json:"member"`
	Engine  string `json:"engine"`
	Model   string `json:"model"`
	Breaker string `json:"breaker"`
	// State is a member found at run time that does not serve:
	// "checking" (its first health check has not passed) or "draining"
	// (its address left the source; its requests finish). Empty when it
	// serves.
	State string `json:"state,omitempty"`
}
