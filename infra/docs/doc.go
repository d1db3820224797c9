// Package docs holds the project's documents beyond the README (contract, integrating,
// security, operations, performance, contributing) and the test that keeps their links whole.
package docs
