package kit

func matrixCases() []semantic { return nil }
