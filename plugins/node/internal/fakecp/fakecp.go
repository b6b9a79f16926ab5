package fakecp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// Server is a fake control plane. Start one with New; Close it when done.
type Server struct {
	srv *httptest.Server

	mu      sync.Mutex
	snap    *publication.Snapshot
	sites   []byte // GET /v1/sites, when SetSites gave it
	changed chan struct{}
	quit    chan struct{}
	closed  bool
}

// New starts a fake control plane with nothing published yet.
func New() *Server {
	s := &Server{changed: make(chan struct{}), quit: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the API base URL.
func (s *Server) URL() string { return s.srv.URL }

// Publish makes sites the next version and wakes the waiting followers. It
// returns the new version.
func (s *Server) Publish(sites []publication.Site) uint64 {
	return s.PublishFormat(0, sites)
}

// PublishFormat is Publish of a snapshot in publication format format
// (publication.FormatRamp for sites that carry a Ramp).
func (s *Server) PublishFormat(format int, sites []publication.Site) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := uint64(1)
	if s.snap != nil {
		v = s.snap.Version + 1
	}
	s.snap = &publication.Snapshot{Version: v, Format: format, Sites: sites}
	close(s.changed)
	s.changed = make(chan struct{})
	return v
}

// SetSites makes GET /v1/sites answer {"sites": sites} (each element a
// site view: "site", and "origins" by name with "level", "address" and
// "state"); until then it answers 404.
func (s *Server) SetSites(sites any) error {
	b, err := json.Marshal(map[string]any{"sites": sites})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.sites = b
	s.mu.Unlock()
	return nil
}

// Close stops the server: waiting followers get an error, later ones a
// refused connection.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.quit)
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/sites" && r.Method == http.MethodGet {
		s.mu.Lock()
		b := s.sites
		s.mu.Unlock()
		if b == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	if r.URL.Path != "/v1/publication" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if err != nil && r.URL.Query().Get("after") != "" {
		http.Error(w, "after: not a version", http.StatusBadRequest)
		return
	}
	wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
	if err != nil || wait <= 0 || wait > time.Minute {
		wait = 30 * time.Second
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		snap, changed := s.snap, s.changed
		s.mu.Unlock()
		if snap != nil && snap.Version > after {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(snap)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			w.WriteHeader(http.StatusNotModified)
			return
		case <-s.quit:
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		case <-r.Context().Done():
			return
		}
	}
}
