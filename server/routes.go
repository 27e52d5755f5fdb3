package server

import (
	"encoding/json"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/runs"
)

// routes lists the endpoints; the mux and the OpenAPI document are made
// from it.
func (s *Server) routes() []route {
	return append([]route{
		{method: "GET", path: "/ok", summary: "Health check", open: true, handler: s.ok},
		{method: "GET", path: "/info", summary: "Server information", open: true, handler: s.info},
		{method: "GET", path: "/openapi.json", summary: "This API's OpenAPI document", open: true, handler: s.openapi},

		{method: "POST", path: "/assistants", summary: "Create an assistant from a graph (its config, context, name and metadata)", handler: s.createAssistant},
		{method: "POST", path: "/assistants/search", summary: "Search assistants", handler: s.searchAssistants},
		{method: "POST", path: "/assistants/count", summary: "Count assistants", handler: s.countAssistants},
		{method: "GET", path: "/assistants/{assistant_id}", summary: "Get an assistant", handler: s.getAssistant},
		{method: "PATCH", path: "/assistants/{assistant_id}", summary: "Update an assistant: a new version, its latest", handler: s.patchAssistant},
		{method: "DELETE", path: "/assistants/{assistant_id}", summary: "Delete an assistant and its versions (delete_threads: its threads too)", handler: s.deleteAssistant},
		{method: "POST", path: "/assistants/{assistant_id}/versions", summary: "An assistant's versions, newest first", handler: s.assistantVersions},
		{method: "POST", path: "/assistants/{assistant_id}/latest", summary: "Make one of an assistant's versions its latest", handler: s.setLatestAssistant},
		{method: "GET", path: "/assistants/{assistant_id}/graph", summary: "An assistant's graph (nodes and edges)", handler: s.assistantGraph},
		{method: "GET", path: "/assistants/{assistant_id}/schemas", summary: "An assistant's state schemas", handler: s.assistantSchemas},
		{method: "GET", path: "/assistants/{assistant_id}/subgraphs", summary: "An assistant's subgraphs' schemas, by namespace (recurse: nested ones too)", handler: s.assistantSubgraphs},
		{method: "GET", path: "/assistants/{assistant_id}/subgraphs/{namespace}", summary: "The schemas of an assistant's subgraph of a namespace (recurse: and below)", handler: s.assistantSubgraphs},

		{method: "POST", path: "/threads", summary: "Create a thread", handler: s.createThread},
		{method: "POST", path: "/threads/search", summary: "Search threads", handler: s.searchThreads},
		{method: "POST", path: "/threads/count", summary: "Count threads", handler: s.countThreads},
		{method: "GET", path: "/threads/{thread_id}", summary: "Get a thread", handler: s.getThread},
		{method: "PATCH", path: "/threads/{thread_id}", summary: "Update a thread's metadata", handler: s.patchThread},
		{method: "DELETE", path: "/threads/{thread_id}", summary: "Delete a thread", handler: s.deleteThread},
		{method: "POST", path: "/threads/{thread_id}/copy", summary: "Copy a thread", handler: s.copyThread},
		{method: "POST", path: "/threads/prune", summary: "Prune threads by id: delete them, or keep each branch's newest checkpoint (keep_latest)", handler: s.pruneThreads},
		{method: "GET", path: "/threads/{thread_id}/state", summary: "A thread's state at its head", handler: s.getState},
		{method: "POST", path: "/threads/{thread_id}/state", summary: "Update a thread's state (from a checkpoint: fork)", handler: s.updateState},
		{method: "GET", path: "/threads/{thread_id}/state/{checkpoint_id}", summary: "A thread's state at a checkpoint", handler: s.getState},
		{method: "POST", path: "/threads/{thread_id}/state/checkpoint", summary: "A thread's state at a checkpoint", handler: s.postStateCheckpoint},
		{method: "GET", path: "/threads/{thread_id}/history", summary: "A thread's history", handler: s.getHistory},
		{method: "POST", path: "/threads/{thread_id}/history", summary: "A thread's history", handler: s.postHistory},
		{method: "POST", path: "/threads/{thread_id}/replay", summary: "Run a thread's runs again with the current code, every model and tool call answered from the recording, and report the first departure (Cairn)", long: true, handler: s.replayThread},
		{method: "POST", path: "/threads/{thread_id}/steer", summary: "Send a message to a thread's running run, taken at its next step (follow_up: a new run when it ends) (Cairn)", handler: s.steer},
		{method: "GET", path: "/threads/{thread_id}/inbox", summary: "A thread's inbox: the messages sent to its runs, pending, consumed at a checkpoint or made a run (Cairn)", handler: s.threadInbox},
		{method: "GET", path: "/threads/{thread_id}/storage", summary: "Where a thread's stored bytes go: checkpoints (by channel and namespace), pending writes, runs and run event logs", handler: s.threadStorage},

		{method: "POST", path: "/threads/{thread_id}/runs", summary: "Create a background run", handler: s.postRun},
		{method: "POST", path: "/threads/{thread_id}/runs/stream", summary: "Create a run and stream it", long: true, handler: s.postRunStream},
		{method: "POST", path: "/threads/{thread_id}/runs/wait", summary: "Create a run and wait for its outcome", long: true, handler: s.postRunWait},
		{method: "GET", path: "/threads/{thread_id}/runs", summary: "List a thread's runs", handler: s.listRuns},
		{method: "GET", path: "/threads/{thread_id}/runs/{run_id}", summary: "Get a run", handler: s.getRun},
		{method: "DELETE", path: "/threads/{thread_id}/runs/{run_id}", summary: "Delete a run", handler: s.deleteRun},
		{method: "POST", path: "/threads/{thread_id}/runs/{run_id}/cancel", summary: "Cancel a run", long: true, handler: s.cancelRun},
		{method: "POST", path: "/threads/{thread_id}/runs/{run_id}/retry", summary: "Run a failed or cancelled run again from its last checkpoint (Cairn)", handler: s.retryRunHTTP},
		{method: "GET", path: "/threads/{thread_id}/runs/{run_id}/join", summary: "Wait for a run's outcome", long: true, handler: s.joinRun},
		{method: "GET", path: "/threads/{thread_id}/runs/{run_id}/stream", summary: "Join a run's stream (Last-Event-ID resumes)", long: true, handler: s.joinStream},

		{method: "POST", path: "/threads/{thread_id}/commands", summary: "Run a command of LangGraph's thread-centric protocol on a thread (run.start, input.respond, input.inject, state.get, state.listCheckpoints, state.fork, agent.getTree, subscription.*)", long: true, handler: s.postV2Command},
		{method: "GET", path: "/threads/{thread_id}/stream/events", summary: "The thread-centric protocol over a WebSocket: commands, and events for the subscriptions made on it", long: true, handler: s.getV2Socket},
		{method: "POST", path: "/threads/{thread_id}/stream/events", summary: "A thread's events across its runs in LangGraph's thread-centric protocol (SSE; since resumes)", long: true, handler: s.postV2Events},

		{method: "GET", path: "/interrupts", summary: "Pending interrupts across threads (status, assistant_id, metadata filters)", handler: s.listInterrupts},
		{method: "GET", path: "/threads/{thread_id}/interrupts", summary: "A thread's pending interrupt", handler: s.threadInterrupts},
		{method: "POST", path: "/threads/{thread_id}/interrupts/{interrupt_id}/answer", summary: "Approve, edit or reject a pending interrupt", handler: s.answerInterrupt},

		{method: "GET", path: "/queue", summary: "Runs pending and running, by assistant; the queue's workers and jobs (Cairn)", handler: s.getQueue},
		{method: "POST", path: "/runs", summary: "Create a stateless background run", handler: s.postRun},
		{method: "POST", path: "/runs/stream", summary: "Create a stateless run and stream it", long: true, handler: s.postRunStream},
		{method: "POST", path: "/runs/wait", summary: "Create a stateless run and wait for its outcome", long: true, handler: s.postRunWait},
		{method: "POST", path: "/runs/batch", summary: "Create stateless background runs, all checked before any is made", handler: s.postRunBatch},
		{method: "POST", path: "/runs/crons", summary: "Create a stateless cron: each tick a run on a new thread", handler: s.createCron},
		{method: "POST", path: "/threads/{thread_id}/runs/crons", summary: "Create a cron on a thread: each tick a run on it", handler: s.createCron},
		{method: "POST", path: "/runs/crons/search", summary: "Search crons", handler: s.searchCrons},
		{method: "POST", path: "/runs/crons/count", summary: "Count crons", handler: s.countCrons},
		{method: "GET", path: "/runs/crons/{cron_id}", summary: "Get a cron", handler: s.getCron},
		{method: "PATCH", path: "/runs/crons/{cron_id}", summary: "Update a cron", handler: s.patchCron},
		{method: "DELETE", path: "/runs/crons/{cron_id}", summary: "Delete a cron", handler: s.deleteCron},

		{method: "PUT", path: "/store/items", summary: "Store or update an item of the long-term memory store", handler: s.putItem},
		{method: "GET", path: "/store/items", summary: "Get an item (namespace, key, refresh_ttl in the query)", handler: s.getItem},
		{method: "DELETE", path: "/store/items", summary: "Delete an item", handler: s.deleteItem},
		{method: "POST", path: "/store/items/search", summary: "Search items under a namespace prefix (filter, query)", handler: s.searchItems},
		{method: "POST", path: "/store/namespaces", summary: "List namespaces (prefix, suffix, max_depth)", handler: s.listNamespaces},
	}, append(s.saverRoutes(), s.bundleRoutes()...)...)
}

func (s *Server) ok(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

func (s *Server) info(w http.ResponseWriter, _ *http.Request) error {
	version := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": version, "server": "cairn", "langgraph_py_version": nil,
		"flags": map[string]bool{"assistants": true, "crons": true, "langsmith": false, "store": true}, "started_at": runs.APITime(s.started)})
	return nil
}

func (s *Server) assistant(r *http.Request) (runs.Assistant, error) {
	return s.svc.AssistantGraph(r.Context(), r.PathValue("assistant_id"))
}

func (s *Server) searchAssistants(w http.ResponseWriter, r *http.Request) error {
	var q runs.AssistantSearch
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	out, total, err := s.svc.SearchAssistants(r.Context(), q)
	if err != nil {
		return err
	}
	writePage(w, out, q.Select, q.Offset, total)
	return nil
}

// writePage answers a page of a listing (its fields selected) with the
// total and the next page's offset in the pagination headers.
func writePage[T any](w http.ResponseWriter, page []T, sel []string, offset, total int) {
	w.Header().Set("X-Pagination-Total", strconv.Itoa(total))
	if next := offset + len(page); next < total {
		w.Header().Set("X-Pagination-Next", strconv.Itoa(next))
	}
	writeJSON(w, http.StatusOK, selectFields(page, sel))
}

func (s *Server) countAssistants(w http.ResponseWriter, r *http.Request) error {
	var q runs.AssistantSearch
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	q.Limit, q.Offset = new(0), 0
	_, total, err := s.svc.SearchAssistants(r.Context(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, total)
	return nil
}

func (s *Server) getAssistant(w http.ResponseWriter, r *http.Request) error {
	a, err := s.svc.GetAssistant(r.Context(), r.PathValue("assistant_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) createAssistant(w http.ResponseWriter, r *http.Request) error {
	var q runs.AssistantCreate
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	a, err := s.svc.CreateAssistant(r.Context(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) patchAssistant(w http.ResponseWriter, r *http.Request) error {
	var p runs.AssistantPatch
	if err := decodeBody(r, &p); err != nil {
		return err
	}
	a, err := s.svc.PatchAssistant(r.Context(), r.PathValue("assistant_id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) deleteAssistant(w http.ResponseWriter, r *http.Request) error {
	threads := false
	if v := r.URL.Query().Get("delete_threads"); v != "" {
		var err error
		if threads, err = strconv.ParseBool(v); err != nil {
			return unprocessable("delete_threads", "%q: want true or false", v)
		}
	}
	id := r.PathValue("assistant_id")
	if err := s.svc.DeleteAssistant(r.Context(), id, threads); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []string{id})
	return nil
}

func (s *Server) assistantVersions(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		Limit    *int           `json:"limit"`
		Offset   int            `json:"offset"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	limit := 10
	if q.Limit != nil {
		limit = *q.Limit
	}
	if limit < 1 || limit > 1000 || q.Offset < 0 {
		return unprocessable("$.limit", "limit %d, offset %d: want a limit of 1 to 1000 and an offset of at least 0", limit, q.Offset)
	}
	out, err := s.svc.AssistantVersions(r.Context(), r.PathValue("assistant_id"), q.Metadata, limit, q.Offset)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) setLatestAssistant(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		Version *int `json:"version"`
	}
	if err := decodeBody(r, &q); err != nil {
		return err
	}
	if q.Version == nil || *q.Version < 1 {
		return unprocessable("$.version", "required: a version number from 1")
	}
	a, err := s.svc.SetLatestVersion(r.Context(), r.PathValue("assistant_id"), *q.Version)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// assistantGraph draws the graph as LangGraph does: nodes with ids,
// edges with source and target; a router's edges are conditional, to each
// node it may choose (those its assistant names, or every node).
func (s *Server) assistantGraph(w http.ResponseWriter, r *http.Request) error {
	a, err := s.assistant(r)
	if err != nil {
		return err
	}
	info := a.Info()
	type node struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data any    `json:"data"` // a node's: {id, name}, as LangGraph draws a runnable
	}
	type edge struct {
		Source      string `json:"source"`
		Target      string `json:"target"`
		Conditional bool   `json:"conditional,omitempty"`
	}
	nodes := []node{{ID: flow.START, Type: "schema", Data: flow.START}}
	for _, n := range info.Nodes {
		nodes = append(nodes, node{ID: n, Type: "runnable", Data: map[string]any{"id": []string{"cairn", info.ID, n}, "name": n}})
	}
	nodes = append(nodes, node{ID: flow.END, Type: "schema", Data: flow.END})
	edges := []edge{}
	targets := slices.Concat(info.Nodes, []string{flow.END}) // a router may choose any node
	for _, e := range info.Edges {
		if !e.Conditional || e.To != "" {
			edges = append(edges, edge{Source: e.From, Target: e.To, Conditional: e.Conditional})
			continue
		}
		for _, n := range targets {
			edges = append(edges, edge{Source: e.From, Target: n, Conditional: true})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": nodes, "edges": edges})
	return nil
}

func (s *Server) assistantSchemas(w http.ResponseWriter, r *http.Request) error {
	a, err := s.assistant(r)
	if err != nil {
		return err
	}
	sc, err := runs.AssistantSchemas(a)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"graph_id": a.Info().ID, "input_schema": sc.Input, "output_schema": sc.Output, "state_schema": sc.State,
		"config_schema": sc.Config, "context_schema": sc.Context})
	return nil
}

func (s *Server) assistantSubgraphs(w http.ResponseWriter, r *http.Request) error {
	a, err := s.assistant(r)
	if err != nil {
		return err
	}
	recurse := false
	if v := r.URL.Query().Get("recurse"); v != "" {
		if recurse, err = strconv.ParseBool(v); err != nil {
			return unprocessable("recurse", "%q: want true or false", v)
		}
	}
	writeJSON(w, http.StatusOK, runs.AssistantSubgraphs(a, r.PathValue("namespace"), recurse))
	return nil
}

// openapi describes the routes (paths, methods, summaries, parameters).
func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) error {
	paths := map[string]map[string]any{}
	for _, rt := range s.routes() {
		op := map[string]any{"summary": rt.summary, "responses": map[string]any{"200": map[string]any{"description": "OK"}, "404": map[string]any{"description": "Not found"}, "422": map[string]any{"description": "Invalid request"}}}
		var params []map[string]any
		for _, seg := range strings.Split(rt.path, "/") {
			if strings.HasPrefix(seg, "{") {
				params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true, "schema": map[string]string{"type": "string"}})
			}
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.method == "POST" || rt.method == "PATCH" || rt.method == "PUT" || (rt.method == "DELETE" && strings.HasPrefix(rt.path, "/store/")) {
			op["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]string{"type": "object"}}}}
		}
		if strings.HasSuffix(rt.path, "/stream") {
			op["responses"].(map[string]any)["200"] = map[string]any{"description": "Server-sent events", "content": map[string]any{"text/event-stream": map[string]any{}}}
		}
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	doc := map[string]any{"openapi": "3.1.0", "info": map[string]string{"title": "Cairn", "version": "1", "description": "The LangGraph Platform API, served by Cairn over its store."}, "paths": paths}
	b, _ := json.Marshal(doc) // maps of strings always marshal
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	return nil
}
