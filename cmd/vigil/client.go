package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/vigilcdn/vigil/api"
)

// clientFlags adds -address, -token and -json to a command's flags, and
// the https ones newClient reads: -ca-cert, -client-cert, -client-key.
func clientFlags(fs *flag.FlagSet) (addr, token *string, asJSON *bool) {
	defAddr := os.Getenv("VIGIL_ADDR")
	if defAddr == "" {
		defAddr = api.DefaultAddress
	}
	addr = fs.String("address", defAddr, "agent API address (env VIGIL_ADDR); https://... for an API with control { api { tls } }")
	token = fs.String("token", "", "API token (env VIGIL_TOKEN)")
	asJSON = fs.Bool("json", false, "print JSON")
	fs.String("ca-cert", os.Getenv("VIGIL_CACERT"), "PEM `file` of the CA that signed the API's certificate, trusted besides the system's roots (env VIGIL_CACERT)")
	fs.String("client-cert", os.Getenv("VIGIL_CLIENT_CERT"), "PEM client certificate `file`, for an API with client_ca_file (env VIGIL_CLIENT_CERT)")
	fs.String("client-key", os.Getenv("VIGIL_CLIENT_KEY"), "PEM private key `file` of -client-cert (env VIGIL_CLIENT_KEY)")
	return addr, token, asJSON
}

// newClient is the API client of the CLI's commands: the token from
// -token or VIGIL_TOKEN, the actor user@host (cli), and the https
// settings of clientFlags read from fs.
func newClient(fs *flag.FlagSet, addr, token string) (*api.Client, error) {
	if token == "" {
		token = os.Getenv("VIGIL_TOKEN")
	}
	c := api.NewClient(addr, token)
	c.Actor = actorName()
	flagValue := func(name string) string {
		if f := fs.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	files := api.TLSFiles{CAFile: flagValue("ca-cert"), CertFile: flagValue("client-cert"), KeyFile: flagValue("client-key")}
	cfg, err := files.Config()
	if err != nil {
		return nil, fmt.Errorf("-ca-cert, -client-cert, -client-key: %w", err)
	}
	if cfg != nil {
		c.SetTLS(cfg)
	}
	return c, nil
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
