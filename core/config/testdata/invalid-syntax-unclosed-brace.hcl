source "direct" {
  plugin = "vigil-source-direct"

# want: 1:17: Unclosed configuration block; There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.
