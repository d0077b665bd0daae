// Package docscheck holds the test that keeps the repository's
// documentation connected to itself and to the code: every link between
// the Markdown pages, and every docs/<page>.md#<heading> a Go comment
// cites, must name a page and a heading that exist (docs/README.md says
// code cites the docs this way).
package docscheck
