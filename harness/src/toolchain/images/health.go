// An HTTP server for probe tests. It listens on $PORT (default 8080); /healthz and /readyz
// answer 200 unless /tmp/unhealthy or /tmp/unready exists, then 500; /version answers the
// image version ($HARNESS_IMAGE_VERSION); with $DOCROOT set, every other path is a file under
// it, as a web server's document root (a directory without index.html is listed). With
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
		mux.Handle("/", http.FileServer(http.Dir(root)))
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
