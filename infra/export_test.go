package infra

// HelpLines is how many variables have a help line.
func HelpLines() int { return len(variableHelp) }
