package ha

import "hash/fnv"

// weight is the rendezvous (highest random weight) score of a member for
// a site: the site goes to the live member with the highest score, so a
// member joining or leaving moves only the sites it wins or held.
func weight(member, site string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(site))
	x := h.Sum64()
	// splitmix64 finalizer: FNV alone is poorly mixed in the high bits.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Assign returns the member that owns site among members ("" when there
// is none).
func Assign(site string, members []string) string {
	best, bestW := "", uint64(0)
	for _, m := range members {
		if w := weight(m, site); best == "" || w > bestW || (w == bestW && m < best) {
			best, bestW = m, w
		}
	}
	return best
}
