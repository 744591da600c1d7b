// Package cli is queenctl's command-line machinery, apart from what any
// command does: flag sets that report instead of printing or exiting,
// flags among the arguments, a command's help (its own flags, then the
// global ones), the command table with its subcommands and "help COMMAND",
// and the usage error that means nothing was sent. It imports nothing of
// this module.
package cli
