package runway

// ParseTask exposes the task decoder to the fuzz test.
var ParseTask = parseTask
