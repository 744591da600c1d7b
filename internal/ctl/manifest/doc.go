// Package manifest reads queenctl's queue manifests and compares them
// with what a gateway has. A manifest lists queues with their options,
// spelled exactly as on the wire (docs/admin-api.md), so that what an
// operator reads in the manifest is what the gateway receives:
//
//	queues:
//	  - name: payments
//	    dedupWindowSeconds: 600
//	    retentionSeconds: 86400
//
// Several YAML documents (separated by ---) may each list queues. Parse
// validates a whole manifest and reports every problem with its line at
// once (Error); DiffQueue and RenderDiff are what apply --dry-run shows.
// It knows the options through queueopt and sends nothing itself.
package manifest
