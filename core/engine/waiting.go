package engine

import (
	"time"

	"github.com/vigilcdn/vigil/core/fleet"
	"github.com/vigilcdn/vigil/core/readmodel"
)

// What the site view shows beside the state so that no state is hidden
// (docs/api.md): the failback dwell's end, from which the read model
// tells a failback waiting out its dwell, and the drill running on the
// site.

// waitFill is the read model's dwell end and running drill of a site
// snapshot.
func waitFill(snap *siteSnap) (time.Time, *readmodel.Drill) {
	var dwell time.Time
	if snap.dwell != 0 {
		dwell = fleet.TickTime(snap.dwell)
	}
	d := snap.drill
	if !d.running() {
		return dwell, nil
	}
	return dwell, &readmodel.Drill{Level: d.level, Started: timeOf(d.started), Until: timeOf(d.until), Actor: d.actor}
}
