//go:build !linux

package proxy

import (
	"errors"
	"net"
)

// The event loops (loop_linux.go) are built on epoll: elsewhere the Server
// runs a goroutine per connection.

type coTask struct{}

type coLoop struct{}

func nextLoop(int) (*coLoop, error) { return nil, errors.New("proxy loops need Linux") }

func (l *coLoop) start(func(*coTask)) {}

func (t *coTask) wait() {}

func (t *coTask) post() {}

func bindConn(net.Conn, *coTask) {}

func releaseConn(net.Conn, *func()) {}

func connLoop(net.Conn) int { return 0 }

func taskLoop(*coTask) int { return 0 }
