package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/user"

	"github.com/vigilcdn/vigil/api"
)

// clientFlags adds -address, -token and -json to a command's flags.
func clientFlags(fs *flag.FlagSet) (addr, token *string, asJSON *bool) {
	defAddr := os.Getenv("VIGIL_ADDR")
	if defAddr == "" {
		defAddr = api.DefaultAddress
	}
	addr = fs.String("address", defAddr, "agent API address (env VIGIL_ADDR)")
	token = fs.String("token", "", "API token (env VIGIL_TOKEN)")
	asJSON = fs.Bool("json", false, "print JSON")
	return addr, token, asJSON
}

// newClient is the API client of the CLI's commands: the token from
// -token or VIGIL_TOKEN, the actor user@host (cli).
func newClient(addr, token string) *api.Client {
	if token == "" {
		token = os.Getenv("VIGIL_TOKEN")
	}
	c := api.NewClient(addr, token)
	c.Actor = actorName()
	return c
}

func actorName() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host + " (cli)"
}

func printJSON(w io.Writer, raw []byte) {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		w.Write(raw)
		return
	}
	buf.WriteByte('\n')
	w.Write(buf.Bytes())
}
