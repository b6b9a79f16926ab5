// Package fleet holds every configured site with its decision state and runs
// rounds over them: the scheduler picks the sites, the vote chain walks the
// sources, and the decision core applies the verdicts. Operator actions
// (switch, disable, enable) are applied here by site and origin name.
//
// With health_check { confirm_interval }, the fleet also keeps the sites
// in doubt (their last verdicts went against their origins' states, or a
// passive report made them suspect) and plans confirmation rounds of
// those that are due, within control { confirm_budget } (confirm.go,
// docs/decisions.md#fast-confirmation). When they run is the caller's.
//
// `vigil simulate` and `vigil agent` both drive a Fleet; they differ only in
// where the votes come from (a timeline or plugins) and in what they do with
// the reports, so the two can never disagree.
package fleet
