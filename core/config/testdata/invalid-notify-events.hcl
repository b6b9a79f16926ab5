notify "webhook" "ops" {
  url    = "https://hooks.example.com/vigil"
  events = ["origin_sate"]
}

# want: 3:12: Unknown event kind; events lists "origin_sate", which is not an event kind; the kinds are origin_state, level_switched, failback_available, all_levels_unhealthy, origin_flapping, path_partition_suspected, drill_started, drill_ended, failover_timed, ramp_step. Did you mean "origin_state"?
