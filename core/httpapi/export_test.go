package httpapi

// PageGatherer is pageGatherer, for the benchmark that serves the page
// the way /metrics did before engine.Views.SiteGatherer.
type PageGatherer = pageGatherer
