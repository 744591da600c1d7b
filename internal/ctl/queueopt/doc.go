// Package queueopt is queenctl's knowledge of queue options
// (docs/admin-api.md): the table of the options it knows with their
// defaults, units and limits (Known), an option's value as on the wire
// (Value: a number, a word or a list), how a value reads for people
// (Format), and a queue's configuration as the gateway answers it
// (Config), printed as key lines or table cells. Options it does not know
// pass through untouched.
package queueopt
