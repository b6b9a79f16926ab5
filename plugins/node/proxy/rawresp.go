package proxy

// The raw path's answers: a plain response head (HTTP/1.1, a status of 200
// or more, a Content-Length or no body, no Transfer-Encoding or Trailer,
// clean header lines) is read in place from the origin connection's buffer
// and written to the visitor line by line, less the hop-by-hop headers: no
// http.Response, no header map. Anything else is read by http.ReadResponse
// and passed on by respond (raw.go), as before.

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// answer is an origin's answer to an attempt: resp when http.ReadResponse
// read it, else a plain head still in the connection's reader.
type answer struct {
	resp       *http.Response
	status     int
	retryAfter bool
	// The plain head's: its length in the reader, the body's length (-1:
	// none, for HEAD, 204 and 304), and whether the origin closes.
	head   int
	length int64
	close  bool
	stream bool // text/event-stream: each read is flushed
}

// drain ends an answer not passed on (a retry follows): the connection is
// kept when the rest of the answer is short enough to read.
func (a *answer) drain(up *upstream, uc *upConn) {
	const most = 64 << 10
	if a.resp != nil {
		n, err := io.Copy(io.Discard, io.LimitReader(a.resp.Body, most))
		up.release(uc, a.resp, err == nil && n < most)
		return
	}
	_, _ = uc.br.Discard(a.head)
	ok := !a.close && a.length <= most
	if ok && a.length > 0 {
		_, err := uc.br.Discard(int(a.length))
		ok = err == nil
	}
	up.releaseRaw(uc, ok)
}

// releaseRaw is release for a plain answer: uc goes back to the pool when
// its answer was read to the end and the origin keeps it alive.
func (u *upstream) releaseRaw(c *upConn, reusable bool) {
	if reusable {
		u.put(c)
		return
	}
	_ = c.c.Close()
}

// peekAnswer waits for the answer's head in uc's reader and reads it in
// place when it is plain (ok). It reads nothing (ok false, no error) when
// it is not, for http.ReadResponse to read. Errors are those
// http.ReadResponse would give: a timeout, or the connection's end.
func (rc *rawConn) peekAnswer(uc *upConn, method string) (answer, bool, error) {
	br := uc.br
	for {
		buf, _ := br.Peek(br.Buffered())
		if len(buf) > 0 {
			if end, crlf := headEnd(buf); end > 0 {
				if !crlf {
					return answer{}, false, nil
				}
				a, ok := rc.parseAnswer(buf[:end], method)
				if ok && a.length > 0 && int64(br.Buffered()-end) < a.length {
					uc.deadline = time.Time{} // the body is not bounded, as http.Transport's
					if err := uc.c.SetReadDeadline(time.Time{}); err != nil {
						return answer{}, false, err
					}
				}
				return a, ok, nil
			}
			if len(buf) >= br.Size() {
				return answer{}, false, nil
			}
		}
		if _, err := br.Peek(len(buf) + 1); err != nil {
			if len(buf) > 0 && br.Buffered() > len(buf) {
				continue // more came with the error
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return answer{}, false, timeoutError{}
			}
			if len(buf) > 0 {
				return answer{}, false, nil // a cut head: http.ReadResponse says how
			}
			return answer{}, false, err
		}
	}
}

// parseAnswer parses a whole head whose lines end with CRLF, and reports
// whether it is plain. The named hop-by-hop headers go to rc.respNamed.
func (rc *rawConn) parseAnswer(head []byte, method string) (answer, bool) {
	a := answer{head: len(head), length: -1}
	rc.respNamed = rc.respNamed[:0]
	eol := bytes.IndexByte(head, '\n')
	line, rest := head[:eol-1], head[eol+1:]
	// "HTTP/1.1 200 OK": HTTP/1.0 answers (keep-alive rules of their own)
	// go to http.ReadResponse.
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || (len(line) > 12 && line[12] != ' ') {
		return a, false
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return a, false
		}
	}
	a.status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if a.status < 200 {
		return a, false // 1xx: forwarded by the ReadResponse loop
	}
	hasLength := false
	for {
		eol = bytes.IndexByte(rest, '\n')
		line, rest = rest[:eol-1], rest[eol+1:]
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !isToken(line[:colon]) {
			return a, false
		}
		name, value := line[:colon], trimOWS(line[colon+1:])
		if !fieldValue(value) {
			return a, false
		}
		switch {
		case asciiEq(name, "content-length"):
			if hasLength {
				return a, false
			}
			hasLength = true
			if a.length = digits(value); a.length < 0 {
				return a, false
			}
		case asciiEq(name, "transfer-encoding"), asciiEq(name, "trailer"):
			return a, false
		case asciiEq(name, "connection"):
			for len(value) > 0 {
				var tok []byte
				if i := bytes.IndexByte(value, ','); i >= 0 {
					tok, value = trimOWS(value[:i]), value[i+1:]
				} else {
					tok, value = trimOWS(value), nil
				}
				if asciiEq(tok, "close") {
					a.close = true
				}
				if len(tok) > 0 {
					rc.respNamed = append(rc.respNamed, tok)
				}
			}
		case asciiEq(name, "retry-after"):
			a.retryAfter = true
		case asciiEq(name, "content-type"):
			a.stream = len(value) >= 17 && asciiEq(value[:17], "text/event-stream") &&
				(len(value) == 17 || value[17] == ';' || value[17] == ' ' || value[17] == '\t')
		}
	}
	if method == http.MethodHead || a.status == http.StatusNoContent || a.status == http.StatusNotModified {
		a.length = -1 // no body, whatever the length says
		return a, true
	}
	return a, hasLength
}

// hopResponse: the response headers ReverseProxy removes (hopHeaders).
func hopResponse(name []byte) bool {
	switch len(name) {
	case 2:
		return asciiEq(name, "te")
	case 7:
		return asciiEq(name, "upgrade") || asciiEq(name, "trailer")
	case 10:
		return asciiEq(name, "connection") || asciiEq(name, "keep-alive")
	case 16:
		return asciiEq(name, "proxy-connection")
	case 17:
		return asciiEq(name, "transfer-encoding")
	case 18:
		return asciiEq(name, "proxy-authenticate")
	case 19:
		return asciiEq(name, "proxy-authorization")
	}
	return false
}

// respondRaw passes a plain answer on to the visitor, then releases uc. It
// reports whether the visitor's connection can serve another request.
func (rc *rawConn) respondRaw(method string, up *upstream, uc *upConn, a *answer) bool {
	bw := rc.bw
	head, _ := uc.br.Peek(a.head)
	bw.WriteString(statusLine(a.status))
	rest := head[bytes.IndexByte(head, '\n')+1:]
	for {
		eol := bytes.IndexByte(rest, '\n')
		line := rest[:eol-1]
		rest = rest[eol+1:]
		if len(line) == 0 {
			break
		}
		name := line[:bytes.IndexByte(line, ':')]
		if hopResponse(name) || rc.respNamedHas(name) {
			continue
		}
		bw.Write(line)
		bw.WriteString("\r\n")
	}
	if rc.req.close {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
	_, _ = uc.br.Discard(a.head)
	err := rc.copyN(uc.br, max(a.length, 0), a.stream)
	rc.up.Store(nil)
	up.releaseRaw(uc, err == nil && !a.close)
	if err != nil {
		_ = bw.Flush() // what came, then the cut: the visitor sees its connection close
		return false
	}
	return bw.Flush() == nil
}

func (rc *rawConn) respNamedHas(name []byte) bool {
	for _, n := range rc.respNamed {
		if asciiEqFold(n, name) {
			return true
		}
	}
	return false
}

// copyN copies n bytes from br to the visitor through its writer's own
// buffer, flushing each read when stream is set.
func (rc *rawConn) copyN(br *bufio.Reader, n int64, stream bool) error {
	bw := rc.bw
	for n > 0 {
		if bw.Available() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		buf := bw.AvailableBuffer()[:min(int64(bw.Available()), n)]
		m, err := br.Read(buf)
		if m > 0 {
			_, _ = bw.Write(buf[:m])
			n -= int64(m)
			if stream {
				if err := bw.Flush(); err != nil {
					return err
				}
			}
		}
		if err != nil && n > 0 {
			return err
		}
	}
	return nil
}

// statusLines are the status lines net/http.Server writes, by code.
var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			m[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
		}
	}
	return m
}()

func statusLine(code int) string {
	if l, ok := statusLines[code]; ok {
		return l
	}
	return "HTTP/1.1 " + strconv.Itoa(code) + " status code " + strconv.Itoa(code) + "\r\n"
}
