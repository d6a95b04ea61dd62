package cli

// Operator is operator, for the tests.
var Operator = operator
