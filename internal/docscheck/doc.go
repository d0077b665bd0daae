// Package docscheck holds the tests that keep the repository's
// documentation connected to itself and to the code: every link between
// the Markdown pages, and every docs/<page>.md#<heading> a Go comment
// cites, must name a page and a heading that exist; every marker a page
// shows must be one the code writes; a claim tagged as not built yet
// must not be built (docs/README.md says how pages use these).
package docscheck
