// Package tables prints the gateway's answers for people, as queenctl
// shows them when not asked for JSON: a queue with its partitions'
// figures, consumer groups with their positions, leases and activity,
// pending timers, the partitions a group's create or seek moved, and an
// explain's verdict. Everything that came from the gateway goes through
// output's printable rows.
package tables
