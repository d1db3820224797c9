// Package docs holds the project's documents beyond the README (contract, the command line,
// integrating, security, operations, performance, contributing) and the test that keeps their
// links whole.
package docs
