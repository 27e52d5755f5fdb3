package lgsaver_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/cairn-dev/cairn/server/lgsaver"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/inmem"
)

// A Saver's routes mounted on a plain mux: the mounting server answers
// a refusal with its kind's status.
func Example() {
	st := inmem.Open(store.Options{})
	defer st.Close()
	saver := lgsaver.New(lgsaver.Config{Store: st})
	mux := http.NewServeMux()
	for _, rt := range saver.Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, func(w http.ResponseWriter, r *http.Request) {
			if err := rt.Handler(w, r); err != nil {
				var e *lgsaver.Error
				if !errors.As(err, &e) {
					http.Error(w, "internal error", http.StatusInternalServerError)
					return
				}
				http.Error(w, e.Msg, lgsaver.StatusOf(err))
			}
		})
	}
	hs := httptest.NewServer(mux)
	defer hs.Close()
	post := func(path, body string) {
		res, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		fmt.Println(res.StatusCode, strings.TrimSpace(string(b)))
	}
	post("/checkpointer/put", `{"thread_id": "t1", "checkpoint": {"v": 4, "id": "c1", "ts": "2026-01-01T00:00:00Z"},
		"channels": {"messages": {"value": ["hi"]}}}`)
	post("/checkpointer/put", `{"thread_id": "t1", "parent_id": "c0", "checkpoint": {"v": 4, "id": "c2", "ts": "2026-01-01T00:00:01Z"}}`)
	post("/checkpointer/get", `{"thread_id": "t1", "checkpoint_id": "c1"}`)
	// Output:
	// 200 {"checkpoint_id":"c1","checkpoint_ns":"","seq":1,"thread_id":"t1"}
	// 404 parent checkpoint "c0" not found in thread "t1" namespace ""
	// 200 {"thread_id":"t1","checkpoint_ns":"","seq":1,"checkpoint":{"v":4,"id":"c1","ts":"2026-01-01T00:00:00Z","channel_versions":null,"versions_seen":null},"channels":{"messages":["hi"]},"pending_writes":[]}
}
