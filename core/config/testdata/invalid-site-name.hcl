source "direct" { plugin = "vigil-source-direct" }
site "../../etc/cron.d/x" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
site "shop eu" {
  hostname = "shop.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
site "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
  hostname = "long.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
site "www" {
  hostname = "www.example.com"
  origin "a1\nserver evil 192.0.2.1:80" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}

# want: 2:6: Invalid site name; site name "../../etc/cron.d/x" cannot be used: write 1 to 63 letters, digits, '-', '_' or '.', beginning with a letter or a digit, such as "www" or "shop-eu.2". The name goes into the API's paths (/v1/sites/NAME), the metrics, the state store and the edge configuration vigil-node writes, which cannot all carry other characters
# want: 7:6: Invalid site name; site name "shop eu" cannot be used: write 1 to 63 letters, digits, '-', '_' or '.', beginning with a letter or a digit, such as "www" or "shop-eu.2". The name goes into the API's paths (/v1/sites/NAME), the metrics, the state store and the edge configuration vigil-node writes, which cannot all carry other characters
# want: 12:6: Invalid site name; site name "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" cannot be used: write 1 to 63 letters, digits, '-', '_' or '.', beginning with a letter or a digit, such as "www" or "shop-eu.2". The name goes into the API's paths (/v1/sites/NAME), the metrics, the state store and the edge configuration vigil-node writes, which cannot all carry other characters
# want: 19:10: Invalid origin name; origin name "a1\nserver evil 192.0.2.1:80" cannot be used: write 1 to 63 letters, digits, '-', '_' or '.', beginning with a letter or a digit, such as "a1" or "paris-2.backup". The name goes into the API's paths (/v1/sites/NAME), the metrics, the state store and the edge configuration vigil-node writes, which cannot all carry other characters
