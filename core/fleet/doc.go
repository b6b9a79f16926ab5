// Package fleet holds every configured site with its decision state and runs
// rounds over them: the scheduler picks the sites, the vote chain walks the
// sources, and the decision core applies the verdicts. Operator actions
// (switch, disable, enable) are applied here by site and origin name.
//
// `vigil simulate` and `vigil agent` both drive a Fleet; they differ only in
// where the votes come from (a timeline or plugins) and in what they do with
// the reports, so the two can never disagree.
package fleet
