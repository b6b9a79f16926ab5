source "direct" {
  min_votes = 1
}

# want: 1:17: Missing required argument; The argument "plugin" is required, but no definition was found.
