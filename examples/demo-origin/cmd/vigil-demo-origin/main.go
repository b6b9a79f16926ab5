// Command vigil-demo-origin is the quickstart's origin server.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	demoorigin "github.com/vigilcdn/vigil/examples/demo-origin"
)

func main() {
	if isVersionArgs(os.Args[1:]) {
		fmt.Println(versionLine())
		return
	}
	if len(os.Args) == 3 && (os.Args[1] == "fail" || os.Args[1] == "hang" || os.Args[1] == "recover" || os.Args[1] == "status") {
		os.Exit(control(os.Args[1], os.Args[2]))
	}
	listen := flag.String("listen", "127.0.0.1:18001", "address to serve on")
	name := flag.String("name", "origin", "name shown in answers")
	flag.Parse()
	srv := &http.Server{Addr: *listen, Handler: demoorigin.New(*name), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "demo origin %s on http://%s (fail: vigil-demo-origin fail %s)\n", *name, *listen, *listen)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintf(os.Stderr, "vigil-demo-origin: %v\n", err)
		os.Exit(1)
	}
}

func control(verb, addr string) int {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	method, path := http.MethodPost, "/-/"+verb
	if verb == "status" {
		method = http.MethodGet
	}
	req, _ := http.NewRequest(method, addr+path, nil)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vigil-demo-origin %s: %v (is the demo origin running?)\n", verb, err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(os.Stdout, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
