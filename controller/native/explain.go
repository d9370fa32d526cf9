package native

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Explain writes the plan for a person: whether the pod converts and why,
// then each marked container, whether it moves and why.
func (p Plan) Explain(w io.Writer) error {
	verdict := "does not convert"
	if p.Convert {
		verdict = fmt.Sprintf("converts (initContainers order %v)", p.InitOrder)
	}
	fmt.Fprintf(w, "  %s: %s\n", verdict, p.Reason)
	for _, pr := range p.Problems {
		fmt.Fprintf(w, "  problem %s: %s\n", pr.Reason, pr.Message)
	}
	if len(p.Containers) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CONTAINER\tMOVES\tWHY")
	for _, c := range p.Containers {
		moves := "no"
		if c.Move {
			moves = "yes"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, moves, c.Reason)
	}
	return tw.Flush()
}
