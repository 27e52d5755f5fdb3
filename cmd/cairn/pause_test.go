package main

import "testing"

// TestLangGraphSDKPause runs server/sdktest/pause.test.mjs, LangGraph's
// semantics at a pause through the official SDK, against a real cairn
// serve of examples/serve on SQLite and PostgreSQL: a person's
// updateState at the approval agent's pause (no asNode) is written as
// draft, and a run with no input sends the edited draft without calling
// the model for draft again nor pausing again. remote.test.mjs drives the
// same server with LangGraph's RemoteGraph (@langchain/langgraph/remote).
func TestLangGraphSDKPause(t *testing.T) { sdkSuiteOnStores(t, "pause.test.mjs", "remote.test.mjs") }
