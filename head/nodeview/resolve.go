// Package nodeview is what `head logs` and `head node` show of one node:
// which candidate or node a name means, its logs over the guest API, and
// its story on one screen.
package nodeview

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rayvast/rayvast/internal/wire"
)

// Match is what a NODE argument names: a candidate and, once it enrolled,
// its node. Either may be nil, not both.
type Match struct {
	Candidate *wire.Candidate
	Node      *wire.Node
}

// ID is the name to show for the match: the instance ID when known.
func (m Match) ID() string {
	switch {
	case m.Node != nil:
		return m.Node.InstanceID
	case m.Candidate.InstanceID != "":
		return m.Candidate.InstanceID
	default:
		return m.Candidate.CandidateID
	}
}

// Resolve finds what name means: an instance ID or candidate ID exactly, or
// else a prefix of exactly one of them. Unknown and ambiguous names are
// errors that say what matched.
func Resolve(cands []wire.Candidate, nodes []wire.Node, name string) (Match, error) {
	if name == "" {
		return Match{}, fmt.Errorf("empty node name")
	}
	all := join(cands, nodes)
	if ms := filter(all, func(id string) bool { return id == name }); len(ms) == 1 {
		return ms[0], nil
	}
	ms := filter(all, func(id string) bool { return strings.HasPrefix(id, name) })
	switch len(ms) {
	case 1:
		return ms[0], nil
	case 0:
		return Match{}, fmt.Errorf("no candidate or node matches %q (%d candidates, %d nodes; see head status)", name, len(cands), len(nodes))
	}
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, describe(m))
	}
	sort.Strings(names)
	return Match{}, fmt.Errorf("%q matches %d: %s; give more of the name", name, len(ms), strings.Join(names, ", "))
}

// join pairs each candidate with its node (by candidate ID); nodes whose
// candidate is gone (pruned) stand alone.
func join(cands []wire.Candidate, nodes []wire.Node) []Match {
	byCand := map[string]*wire.Node{}
	for i := range nodes {
		byCand[nodes[i].CandidateID] = &nodes[i]
	}
	out := make([]Match, 0, len(cands))
	for i := range cands {
		c := &cands[i]
		out = append(out, Match{Candidate: c, Node: byCand[c.CandidateID]})
		delete(byCand, c.CandidateID)
	}
	for i := range nodes {
		if n := byCand[nodes[i].CandidateID]; n == &nodes[i] {
			out = append(out, Match{Node: n})
		}
	}
	return out
}

// filter keeps the matches whose instance ID or candidate ID satisfies ok.
func filter(all []Match, ok func(string) bool) []Match {
	var out []Match
	for _, m := range all {
		for _, id := range ids(m) {
			if id != "" && ok(id) {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

func ids(m Match) []string {
	var out []string
	if m.Candidate != nil {
		out = append(out, m.Candidate.CandidateID, m.Candidate.InstanceID)
	}
	if m.Node != nil {
		out = append(out, m.Node.InstanceID, m.Node.CandidateID)
	}
	return out
}

func describe(m Match) string {
	if m.Candidate != nil {
		s := "candidate " + m.Candidate.CandidateID
		if m.Candidate.InstanceID != "" {
			s += " (instance " + m.Candidate.InstanceID + ")"
		}
		return s
	}
	return "node " + m.Node.InstanceID
}
