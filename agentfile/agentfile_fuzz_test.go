package agentfile_test

import (
	"errors"
	"testing"

	"github.com/cairn-dev/cairn/agentfile"
)

// FuzzParseAgentFile: any bytes give an agent file or a *FileError, never
// a panic.
func FuzzParseAgentFile(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("---\nname: x\nsecrets: {keys: [pin], patterns: ['[0-9]+'], defaults: false}\nsafe_dir: /\n---\n## Instructions\nx\n"))
	f.Add([]byte("---\nname: x\nschemas: {S: {type: object}}\nchain: [{id: a, kind: structured, output_schema: S}]\n---\n## step:a\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nname: x\nmcp_servers:\n  - {name: files, command: ./srv, args: [--root, .], env: {TOKEN: \"${TOKEN}\"}, timeout: 5s}\n  - {name: search, url: http://127.0.0.1:9000/mcp, headers: {Authorization: \"Bearer ${KEY}\"}}\ntools: [files.read, search.*, read_file]\n---\n## Instructions\nx\n"))
	f.Add([]byte("---\nname: x\nmcp_servers: [{name: s, url: \"${\"}]\ntools: [s.*, s.a, t.b]\n---\n## Instructions\nx\n"))
	f.Add([]byte("---\nname: x\ntools: [memory_put, memory_search]\nmemory:\n  namespace: [users, \"{metadata.user}\", \"{agent}-{thread}\"]\n  ttl: 1.5\n  search_limit: 3\n---\n## Instructions\nx\n"))
	f.Add([]byte("---\nname: x\ntools: [memory_get]\nmemory: {namespace: [\"{\", a.b, \"{metadata.}\"]}\n---\n## Instructions\nx\n"))
	f.Add([]byte("---\nname: c\nkind: chat\nmodel: {provider: scripted, script: r.yaml}\ntools: [read_file, memory_search]\nmemory: {namespace: [\"{thread}\"]}\ninterrupt_before: [tools]\napproval: {timeout: 30m, fallback: approve}\n---\n## System prompt\nBe kind.\n## Instructions\nHelp.\n"))
	f.Add([]byte("---\nname: c\nkind: chat\nchain: [{id: a, kind: text}]\ninterrupt_before: [agent, send]\n---\n## step:a\nx\n"))
	f.Add([]byte("---\nname: c\nkind: chat\nmodel: {provider: scripted, script: r.yaml}\ntools: [read_file, files.*]\nmcp_servers: [{name: files, command: x}]\napprove_tools: [read_file, files.read]\napproval: {timeout: 1m, fallback: reject}\n---\n## Instructions\nHelp.\n"))
	f.Add([]byte("---\nname: c\nkind: chat\nmodel: {provider: scripted, script: r.yaml}\ntools: [read_file]\napprove_tools: all\n---\n## Instructions\nHelp.\n"))
	f.Add([]byte("---\nname: c\nkind: chat\ntools: [read_file]\napprove_tools: [all, {x: 1}, null]\n---\n## Instructions\nHelp.\n"))
	f.Add([]byte("---\nname: c\nkind: chain\n---\n## Instructions\nx\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := agentfile.Parse("f.md", data)
		if err != nil {
			var se *agentfile.FileError
			if !errors.As(err, &se) || !errors.Is(err, agentfile.ErrInvalidFile) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if a.Name == "" {
			t.Fatal("parsed an agent file without a name")
		}
		if a.IsChat() && (len(a.Chain) > 0 || len(a.Sections) > 0 || a.Instructions+a.System == "") {
			t.Fatalf("parsed a chat with a chain or without a system message: %+v", a)
		}
	})
}
