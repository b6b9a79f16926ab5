package httpapi

// Scope is what an API token may do. The operator's token
// (control { api { token_env | token_file } }) may do everything; a read
// token (read_token_env | read_token_file) reads everything and changes
// nothing; a node token (node_token_env | node_token_file) reads only
// what an edge node follows: the publication and the sites. So an edge
// machine holds no power to move traffic.
type Scope uint8

// The scopes, from the least to the most.
const (
	scopeNone    Scope = iota // no token sent
	scopeRefused              // a token that is none of the agent's
	ScopeNode
	ScopeRead
	ScopeOperator
)

// String is the scope's name in errors and docs.
func (s Scope) String() string {
	switch s {
	case ScopeNode:
		return "node"
	case ScopeRead:
		return "read"
	case ScopeOperator:
		return "operator"
	case scopeRefused:
		return "refused"
	}
	return "none"
}

// reaches is whether a token of scope s may do what needs want.
func (s Scope) reaches(want Scope) bool { return s >= want && s >= ScopeNode }

// allows says what a token of the scope may do.
func (s Scope) allows() string {
	switch s {
	case ScopeNode:
		return "reads only the publication and the sites"
	case ScopeRead:
		return "reads everything and changes nothing"
	}
	return "may do everything"
}

// configuredBy names the setting of a token of the scope.
func (s Scope) configuredBy() string {
	switch s {
	case ScopeNode:
		return "the node scope or more (node_token_env, read_token_env or token_env)"
	case ScopeRead:
		return "the read scope or more (read_token_env or token_env)"
	}
	return "the operator scope (control { api { token_env | token_file } })"
}
