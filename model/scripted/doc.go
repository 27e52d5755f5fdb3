// Package scripted is a deterministic agent.Model that answers from a YAML
// script, for examples, tests and demos: no network, no API key.
//
//	replies:
//	  - text: "Acme GmbH"            # a plain reply
//	    step: company_name           # optional: only for calls of this step
//	  - json: {name: Acme, city: Berlin}   # any YAML value, sent as its JSON text
//	  - tool_calls:                  # the model asks for tools
//	      - name: write_files
//	        args: {files: [{filename: main.go, content: "package main"}]}
//	  - echo_tool: true              # answers what the last tool returned
//	  - text: "Sunny, 21 °C."
//	    user: weather                # optional: only when the last user message says "weather"
//	  - echo_user: "You said: {user}. "   # {user}: the last user message
//	    pad_to: 200                  # optional: right-padded with x to 200 bytes
//	    repeat: true                 # optional: never used up
//	  - error: {status: 429, message: slow down}   # a provider error
//	    delay_ms: 200                # optional: wait before answering
//	  - text: "One line, streamed."
//	    chunk_delay_ms: 20           # optional: streamed, each chunk 20 ms after the last
//	    chunk_chars: 3               # optional: in pieces of 3 characters (default: word by word)
//
// Streamed (GenerateStream, as when a run is streamed in messages mode), a
// reply's text comes word by word, or chunk_chars characters at a time;
// with chunk_delay_ms each piece, the first included, comes that long
// after the one before, so a test or benchmark sees a paced model.
//
// A reply with step: is used only by a call whose Request.Step matches;
// the others are used in order; a reply with user: only by a call whose
// last user message contains that text (letter case aside). A reply is
// used once, unless it has repeat: true. Running out of replies is an
// error naming the file. Token usage is estimated as bytes/4, the same
// every run.
package scripted
