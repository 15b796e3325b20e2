package verify

import "github.com/kiln-dev/kiln/ir"

// scopes are the types of the locals in scope, one map a block, innermost last.
type scopes []map[string]ir.Type

// push opens a scope holding locals; pop closes the innermost one.
func (s *scopes) push(locals map[string]ir.Type) { *s = append(*s, locals) }
func (s *scopes) pop()                           { *s = (*s)[:len(*s)-1] }

// declare adds a local to the innermost scope.
func (s scopes) declare(name string, t ir.Type) { s[len(s)-1][name] = t }

// local is the type of the innermost local called name, or 0.
func (s scopes) local(name string) ir.Type {
	for i := len(s) - 1; i >= 0; i-- {
		if t, ok := s[i][name]; ok {
			return t
		}
	}
	return 0
}

// elemType is the element type of p's buffer or shared array called name, or 0.
func elemType(p *ir.Program, name string) ir.Type {
	if b, ok := p.Buffer(name); ok {
		return b.Type
	}
	for _, s := range p.Shared {
		if s.Name == name {
			return s.Type
		}
	}
	return 0
}
