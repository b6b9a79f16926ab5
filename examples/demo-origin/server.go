package demoorigin

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Mode is how the server answers.
type Mode string

// The modes.
const (
	Healthy Mode = "healthy"
	Failing Mode = "failing" // every request answers 503
	Hanging Mode = "hanging" // requests hang until recover (or 60 s)
)

// Server is one demo origin.
type Server struct {
	Name string

	mu      sync.Mutex
	mode    Mode
	release chan struct{}
	hits    map[string]int
}

// New returns a healthy server named name.
func New(name string) *Server {
	return &Server{Name: name, mode: Healthy, release: make(chan struct{}), hits: map[string]int{}}
}

// SetMode switches the server's behaviour.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode == Hanging && m != Hanging {
		close(s.release)
		s.release = make(chan struct{})
	}
	s.mode = m
}

// Mode returns the current behaviour.
func (s *Server) Mode() Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

// ServeHTTP answers control requests under /-/ and everything else
// according to the mode.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/-/fail", "/-/hang", "/-/recover":
		if r.Method != http.MethodPost {
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		m := map[string]Mode{"/-/fail": Failing, "/-/hang": Hanging, "/-/recover": Healthy}[r.URL.Path]
		s.SetMode(m)
		fmt.Fprintf(w, "%s is now %s\n", s.Name, m)
		return
	case "/-/status":
		fmt.Fprintf(w, "%s is %s\n", s.Name, s.Mode())
		return
	}
	s.mu.Lock()
	mode, release := s.mode, s.release
	s.hits[r.URL.Path]++
	s.mu.Unlock()
	switch mode {
	case Failing:
		http.Error(w, s.Name+" is failing (demo)", http.StatusServiceUnavailable)
		return
	case Hanging:
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-time.After(60 * time.Second):
		}
	}
	w.Header().Set("X-Served-By", s.Name)
	fmt.Fprintf(w, "hello from %s (host %s, path %s)\n", s.Name, r.Host, r.URL.Path)
}
