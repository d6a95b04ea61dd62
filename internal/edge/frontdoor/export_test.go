package frontdoor

import "context"

// Patterns are the patterns of the front door's own endpoints (the faces'
// aside), as its handler registers them.
func Patterns(s *Server) []string {
	var out []string
	for _, e := range s.endpoints(context.Background()) {
		out = append(out, e.pattern)
	}
	return out
}
