notify "webhok" "ops" {
  url = "https://hooks.example.com/vigil"
}

# want: 1:8: Unknown notifier kind; Notifier kind "webhok" is not known. Did you mean "webhook"?
