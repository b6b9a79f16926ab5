# /etc/vigil/vigil.hcl in the vigil container image. Mount your own over
# it (-v ./vigil.hcl:/etc/vigil/vigil.hcl:ro) and a volume on /var/lib/vigil.
# Relative paths are taken from the folder of this file.

control {
  round_interval = "10s"
  data_dir       = "/var/lib/vigil"
  plugin_dir     = "/usr/lib/vigil/plugins"

  api {
    # Every address of the container: publish it only where the operators
    # are, and give it TLS and a token (docs/production.md).
    listen = ":8470"
    # Set VIGIL_TOKEN in the container's environment and uncomment:
    # token_env = "VIGIL_TOKEN"
  }
}

source "direct" {
  plugin = "vigil-source-direct"
}
