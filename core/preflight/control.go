package preflight

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

// checkToken reads the API token as the agent does before anything starts
// (an unset token_env or an unreadable or empty token_file stops it). The
// token itself is never shown. Offline, an unset variable is a warning:
// the environment checked is then rarely the agent's.
func checkToken(api config.API, loc *locator, offline bool) hcl.Diagnostics {
	switch {
	case api.TokenEnv != "":
		if strings.TrimSpace(os.Getenv(api.TokenEnv)) != "" {
			return nil
		}
		sev := hcl.DiagError
		if offline {
			sev = hcl.DiagWarning
		}
		return hcl.Diagnostics{{
			Severity: sev,
			Summary:  "API token not set",
			Detail: fmt.Sprintf("control { api { token_env = %q } } names an environment variable that is empty or unset here: the agent refuses to start without it. Export %s where the agent runs, or remove token_env.",
				api.TokenEnv, api.TokenEnv),
			Subject: ptr(loc.controlAttr("api", "token_env")),
		}}
	case api.TokenFile != "":
		at := func() hcl.Range { return loc.controlAttr("api", "token_file") }
		b, err := os.ReadFile(api.TokenFile)
		if err != nil {
			return hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Cannot read the API token_file",
				Detail:   fmt.Sprintf("%v: the agent refuses to start without its token. Create the file, or point token_file at it.", err),
				Subject:  ptr(at()),
			}}
		}
		if strings.TrimSpace(string(b)) == "" {
			return hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Empty API token_file",
				Detail:   fmt.Sprintf("The API token_file %s is empty: the agent refuses to start. Write the token in it.", filepath.Clean(api.TokenFile)),
				Subject:  ptr(at()),
			}}
		}
	}
	return nil
}

// checkDataDir reports a data_dir the agent could not create or use as a
// folder. The state in it is `vigil state check`'s business: a check of a
// configuration neither creates data_dir nor opens the state file.
func checkDataDir(c config.Control, loc *locator) hcl.Diagnostics {
	if c.Store != nil {
		return nil // the state is in etcd
	}
	at := func() hcl.Range { return loc.controlAttr("data_dir") }
	fi, err := os.Stat(c.DataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // the agent creates it
	case err != nil:
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot use data_dir",
			Detail:   fmt.Sprintf("%v: the agent keeps its state in data_dir and would refuse to start. Point data_dir at a folder vigil may use.", err),
			Subject:  ptr(at()),
		}}
	case fi.IsDir():
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "data_dir is not a folder",
		Detail:   fmt.Sprintf("data_dir = %q is a file: the agent keeps its state in a folder there (and creates it when missing). Point data_dir at a folder.", c.DataDir),
		Subject:  ptr(at()),
	}}
}
