package ir

// The enumerations (Type, Access, the operators, builtins, layouts and
// precisions) keep their JSON names in an array indexed by value, whose defined
// values run from the first one up to the array's length; these helpers serve
// their String, Parse and listing functions from it.

// enumString returns the name of e, or "invalid" for a value that is not defined.
func enumString[E ~uint8](names []string, first, e E) string {
	if e >= first && int(e) < len(names) {
		return names[e]
	}
	return "invalid"
}

// parseEnum returns the defined value named name.
func parseEnum[E ~uint8](names []string, first E, name string) (E, bool) {
	for e := first; int(e) < len(names); e++ {
		if names[e] == name {
			return e, true
		}
	}
	return 0, false
}

// enumValues lists the defined values in order.
func enumValues[E ~uint8](names []string, first E) []E {
	out := make([]E, 0, len(names)-int(first))
	for e := first; int(e) < len(names); e++ {
		out = append(out, e)
	}
	return out
}
