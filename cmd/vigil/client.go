package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"strings"
	"time"
)

// client talks to a running agent's API.
type client struct {
	base  string
	token string
	http  *http.Client
}

// clientFlags adds -address, -token and -json to a command's flags.
func clientFlags(fs *flag.FlagSet) (addr, token *string, asJSON *bool) {
	defAddr := os.Getenv("VIGIL_ADDR")
	if defAddr == "" {
		defAddr = "http://127.0.0.1:8470"
	}
	addr = fs.String("address", defAddr, "agent API address (env VIGIL_ADDR)")
	token = fs.String("token", "", "API token (env VIGIL_TOKEN)")
	asJSON = fs.Bool("json", false, "print JSON")
	return addr, token, asJSON
}

func newClient(addr, token string) *client {
	if token == "" {
		token = os.Getenv("VIGIL_TOKEN")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return &client{base: strings.TrimSuffix(addr, "/"), token: token, http: &http.Client{Timeout: 2 * time.Minute}}
}

// apiError is the API's JSON error.
type apiError struct {
	Status  int
	Code    string
	Message string
	Hint    string
}

func (e *apiError) Error() string {
	msg := e.Message
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

func actorName() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host + " (cli)"
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("bad address %q: %w", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("X-Vigil-Actor", actorName())
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the agent at %s: %w (is `vigil agent` running? set -address or VIGIL_ADDR)", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", c.base, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message, Hint string } `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return &apiError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message, Hint: e.Error.Hint}
		}
		return &apiError{Status: resp.StatusCode, Message: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], b...)
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding the answer of %s %s: %w", method, path, err)
	}
	return nil
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
