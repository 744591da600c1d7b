// Package jsclients runs JetStream client libraries nobody here wrote (the JavaScript one from npm, pinned by node/package-lock.json) against queengate's JetStream-compatible publish subject.
package jsclients
