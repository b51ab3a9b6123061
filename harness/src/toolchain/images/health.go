// An HTTP server for probe tests. It listens on $PORT (default 8080); /healthz and /readyz
// answer 200 unless /tmp/unhealthy or /tmp/unready exists, then 500; /version answers the
// image version ($HARNESS_IMAGE_VERSION); with $DOCROOT set, every other path is a file under
// it, served as nginx serves its document root by default (see docroot). With
// $SERVE_OPTIONAL set, a port already taken is no reason to exit: it runs until SIGTERM. The
// health image has no shell, so the same binary also creates and removes those files:
// `health touch /tmp/unready`, `health rm /tmp/unready`.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"syscall"
)

func main() {
	if len(os.Args) == 3 {
		os.Exit(fileCommand(os.Args[1], os.Args[2]))
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", unless("/tmp/unhealthy"))
	mux.HandleFunc("/readyz", unless("/tmp/unready"))
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, os.Getenv("HARNESS_IMAGE_VERSION"))
	})
	if root := os.Getenv("DOCROOT"); root != "" {
		mux.HandleFunc("/", docroot(root))
	}
	server := &http.Server{Addr: ":" + port, Handler: mux}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		server.Shutdown(context.Background())
	}()
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		if os.Getenv("SERVE_OPTIONAL") == "" {
			os.Exit(1)
		}
		// A stand-in beside another on the same port (two containers of a pod) still runs,
		// as the service it stands in for would, until SIGTERM.
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
	}
}

// docroot serves the files under root as nginx does with its defaults: a file by its path, a
// directory by its index.html, 403 for a directory without one (no listing), 404 for anything
// missing, and never a redirect. Specs fail an HTTP readiness probe of /index.html by moving
// that file away; Go's FileServer would answer its path with a redirect to "./" and then list
// the directory, and a kubelet's probe follows the redirect and counts the listing as ready.
func docroot(root string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Join(root, filepath.FromSlash(path.Clean("/"+r.URL.Path)))
		info, err := os.Stat(name)
		if err == nil && info.IsDir() {
			name = filepath.Join(name, "index.html")
			if info, err = os.Stat(name); err != nil {
				http.Error(w, "403 Forbidden", http.StatusForbidden)
				return
			}
		}
		if err != nil || info.IsDir() {
			http.NotFound(w, r)
			return
		}
		f, err := os.Open(name)
		if err != nil {
			http.Error(w, "403 Forbidden", http.StatusForbidden)
			return
		}
		defer f.Close()
		http.ServeContent(w, r, name, info.ModTime(), f)
	}
}

// unless answers 200, or 500 while `file` exists.
func unless(file string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if _, err := os.Stat(file); err == nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s exists\n", file)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}

func fileCommand(verb, file string) int {
	var err error
	switch verb {
	case "touch":
		err = os.WriteFile(file, nil, 0o644)
	case "rm":
		err = os.Remove(file)
		if os.IsNotExist(err) {
			err = nil
		}
	default:
		err = fmt.Errorf("usage: health [touch|rm FILE]")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}
