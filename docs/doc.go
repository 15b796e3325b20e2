// Package docs holds kiln's design document, design.md, the contract between
// the host, the SDK and the backends. It has no code: its tests keep the
// document's layout map ("Architecture and layout") true to the tree and hold
// every package to having a doc.go.
package docs
