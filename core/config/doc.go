// Package config loads vigil's HCL configuration (docs/config.md, generated
// from reference.go): one file or every *.hcl file of a folder, merged in
// file-name order.
//
// Every mistake is an hcl.Diagnostic with the file, line and column, a
// summary and a detail saying what to fix; nothing is partially accepted.
// Each source's `config { }` block is kept as an hcl.Body with its source
// ranges, so that the plugin's own schema can decode it later and its errors
// still land on the right line.
//
// LoadCached is Load for the agent: it keeps the decoded Config in
// data_dir (config.cache), keyed on the files' content and the build of
// vigil, and starts from it when neither changed (cache.go). At a reload
// it decodes only the site blocks that changed, taking the others from the
// configuration in force (reparse.go).
package config
