source "direct" { plugin = "vigil-source-direct" }
source "direct" { plugin = "vigil-source-direct" }

# want: 2:1: Duplicate source name; A source named "direct" was already declared at testdata/invalid-duplicate-source.hcl:1,1-16. Source names must be unique: rename or remove one of them.
