package server

import (
	"embed"
	"io/fs"
	"net/http"
)

// uiFiles is the web UI: plain HTML, CSS and JavaScript modules, no build
// step, served at /ui/ from the binary.
//
//go:embed ui
var uiFiles embed.FS

// uiHandler serves the UI's files; any path that is not a file gets
// index.html, so the UI's own routes (#/threads/…) load it.
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded folder is there by construction
	}
	files := http.FileServerFS(sub)
	return http.StripPrefix("/ui", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" {
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
}
