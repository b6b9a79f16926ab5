notify "alertmanager" "am" {
  urls = []
}

# want: 2:10: No Alertmanager; urls lists no Alertmanager: give its base URL, such as ["http://alertmanager:9093"] (two for an HA pair).
