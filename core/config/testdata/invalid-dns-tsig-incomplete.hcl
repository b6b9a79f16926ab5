publish "dns" {
  listen         = "127.0.0.1:5353"
  zone           = "cdn.example.net."
  allow_transfer = ["192.0.2.53"]
  tsig_key       = "vigil-xfr."
}

# want: 1:1: Incomplete TSIG key; tsig_key and tsig_secret_env go together: tsig_key names the key, tsig_secret_env the environment variable holding its base64 secret. Set both, or neither.
