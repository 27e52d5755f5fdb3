// Package storetest is the conformance suite every Cairn store backend
// runs. A backend's test calls Run with a Harness that opens its store.
package storetest
