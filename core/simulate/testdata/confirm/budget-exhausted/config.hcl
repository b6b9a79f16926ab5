control {
  round_interval  = "30s"
  sites_per_round = 10
  confirm_budget  = 20
}

source "direct" {
  plugin = "vigil-source-direct"
}

site "s1" {
  hostname = "s1.example.com"

  health_check {
    confirm_interval = "3s"
  }

  origin "a1" {
    address = "http://127.0.0.1:18100"
    level   = 1
  }

  origin "b1" {
    address = "http://127.0.0.1:18101"
    level   = 2
  }
}

site "s2" {
  hostname = "s2.example.com"

  health_check {
    confirm_interval = "3s"
  }

  origin "a1" {
    address = "http://127.0.0.1:18102"
    level   = 1
  }

  origin "b1" {
    address = "http://127.0.0.1:18103"
    level   = 2
  }
}

site "s3" {
  hostname = "s3.example.com"

  health_check {
    confirm_interval = "3s"
  }

  origin "a1" {
    address = "http://127.0.0.1:18104"
    level   = 1
  }

  origin "b1" {
    address = "http://127.0.0.1:18105"
    level   = 2
  }
}

site "s4" {
  hostname = "s4.example.com"

  health_check {
    confirm_interval = "3s"
  }

  origin "a1" {
    address = "http://127.0.0.1:18106"
    level   = 1
  }

  origin "b1" {
    address = "http://127.0.0.1:18107"
    level   = 2
  }
}

site "s5" {
  hostname = "s5.example.com"

  health_check {
    confirm_interval = "3s"
  }

  origin "a1" {
    address = "http://127.0.0.1:18108"
    level   = 1
  }

  origin "b1" {
    address = "http://127.0.0.1:18109"
    level   = 2
  }
}
