package sdk

import (
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Factory builds the plugin's VoteSource. log writes JSON lines on stderr
// that vigil re-emits under the source's name; keep it for the plugin's own
// logging.
type Factory func(log hclog.Logger) VoteSource

// Serve runs the plugin: it is the whole of a plugin's main. It answers
// vigil's handshake, serves the VoteSource built by factory over gRPC and
// returns only when vigil stops the plugin. Started by hand (not by vigil),
// the binary prints a hint and exits with status 1.
//
// The process also exits by itself when the vigil process that started it
// goes away, even if vigil was killed with SIGKILL.
func Serve(factory Factory) {
	log := hclog.New(&hclog.LoggerOptions{
		Level:      hclog.Debug,
		Output:     os.Stderr,
		JSONFormat: true,
	})
	impl := factory(log)
	watchParent(log, os.Getppid(), 200*time.Millisecond, func() { os.Exit(1) })
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: Plugins(impl),
		GRPCServer:       newGRPCServer,
		Logger:           log,
	})
}

func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize))
	return grpc.NewServer(opts...)
}

// watchParent calls exit once the process's parent is no longer ppid (it
// died and the process was re-parented). On Linux the host also sets
// PR_SET_PDEATHSIG; this covers other systems and hosts that do not.
func watchParent(log hclog.Logger, ppid int, every time.Duration, exit func()) {
	if ppid <= 1 {
		return // started by init or a container's pid 1: nothing to watch
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for range t.C {
			if os.Getppid() != ppid {
				log.Error("vigil host went away; exiting", "host_pid", ppid)
				exit()
				return
			}
		}
	}()
}
