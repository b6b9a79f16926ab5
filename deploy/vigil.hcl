# /etc/vigil/vigil.hcl: the configuration `vigil agent` reads when it is
# given no -config (the packaged service reads it too). A folder of *.hcl
# files works as well: vigil agent -config /etc/vigil/conf.d
#
# Relative paths in this file are taken from the folder of this file
# (/etc/vigil); the packaged paths below are absolute. Check a change with
#   vigil validate /etc/vigil/vigil.hcl
# and apply it with `systemctl reload vigil` (or `vigil reload`): an
# invalid file is refused and the old configuration stays in force.
# Every setting: /usr/share/doc/vigil/config.md (docs/config.md).

control {
  # How often each site's origins are voted on, and how many sites a round
  # takes (the longest-ago first).
  round_interval  = "10s"
  sites_per_round = 500

  # The state (vigil.db: health, levels, the event journal) and the verdict
  # history. The service's StateDirectory; back it up (see production.md).
  data_dir = "/var/lib/vigil"

  # Where the vote-source plugins are; the package installs them here.
  plugin_dir = "/usr/lib/vigil/plugins"

  api {
    # The HTTP API, the status page and /metrics. Keep it on loopback, or
    # give it TLS (tls { cert_file, key_file }) before you open it up.
    listen = "127.0.0.1:8470"

    # The operator's token: changes (switch, disable, reload) need it.
    # Without one the API refuses every change. To set it, put
    #   VIGIL_TOKEN=<the output of: head -c 32 /dev/urandom | base64>
    # in /etc/vigil/vigil.env (mode 0600), which the service reads, and
    # uncomment this line: the agent then refuses to start without it.
    # token_env = "VIGIL_TOKEN"
  }
}

# The control plane's own probe: vigil fetches each origin itself. Add
# "node" (your edge nodes) and "dnspup" sources before it: the first
# sources settle what they can and pass the rest on.
source "direct" {
  plugin = "vigil-source-direct"
}

# A site: its hostname, and its origins by level (1 is the primary, the
# others are backups, taken in order when every origin of the level above
# is unhealthy). Uncomment and edit:
#
# site "www" {
#   hostname = "www.example.com"
#   failback = "auto"
#
#   origin "primary-1" { address = "https://203.0.113.10" }
#   origin "primary-2" { address = "https://203.0.113.11" }
#   origin "backup-1" {
#     address = "https://198.51.100.20"
#     level   = 2
#   }
# }
