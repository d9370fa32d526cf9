package decision

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Explain writes, for a person, how each container was classified and what
// the plan is and why.
func (p Plan) Explain(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tROLE\tSTATE\tMARKED BY\tSTOP BY")
	for _, c := range p.Containers {
		state := string(c.State)
		if c.State == StateTerminated {
			state = fmt.Sprintf("terminated(%d)", c.ExitCode)
		}
		marks, stop := "-", "-"
		if c.Role == RoleSidecar {
			marks = strings.Join(c.MarkedBy, ",")
			var ways []string
			if c.KillByCRR {
				ways = append(ways, "crr")
			}
			if c.QuickExitImage != "" {
				ways = append(ways, "image "+c.QuickExitImage)
			}
			if c.DefaultImage != "" {
				ways = append(ways, "default image "+c.DefaultImage+" where no CRR path")
			}
			if c.IgnoreExitCode {
				ways = append(ways, "ignore-exit-code")
			}
			if len(ways) > 0 {
				stop = strings.Join(ways, ", ")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Role, state, marks, stop)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, c := range p.Containers {
		switch {
		case c.Role == RoleMain:
			fmt.Fprintf(w, "Restart:  main %q follows %s: %s\n", c.Name, c.RestartRules, mainDone(c))
		case c.Role == RoleSidecar && c.KillBlocked:
			fmt.Fprintf(w, "Restart:  sidecar %q follows %s: never stopped (%s)\n", c.Name, c.RestartRules, killBlockedMessage(c))
		case c.Role == RoleSidecar && strings.HasPrefix(c.RestartRules, "container "):
			fmt.Fprintf(w, "Restart:  sidecar %q follows %s: a stop is safe (no exit of 0, 143 or 137 restarts it or the pod)\n", c.Name, c.RestartRules)
		}
	}
	if p.NodePath != "" {
		fmt.Fprintf(w, "Node:     %s\n", p.NodePath)
	}
	fmt.Fprintf(w, "Decision: %s\nReason:   %s\n", p.Verdict, p.Reason)
	if st := p.Stage; st != nil {
		fmt.Fprintf(w, "Order:    %s (stage 0: the sidecars it does not name)\n", strings.Join(st.Order, " -> "))
		fmt.Fprintf(w, "Stage:    %d of %d, stopping %v\n", st.Stage, st.Last, st.Stopping)
		if len(st.Next) > 0 {
			until := "their kill is issued, then until they terminate or the bound passes"
			if !st.Until.IsZero() {
				until = "they terminate, or until " + st.Until.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "Waiting:  %v wait for %v until %s\n", st.Next, st.Stopping, until)
		}
		if len(st.HeldUp) > 0 {
			fmt.Fprintf(w, "Held up:  %v ran past their stage's bound\n", st.HeldUp)
		}
	}
	if p.NeedsJob != "" {
		fmt.Fprintf(w, "Job:      %s is read before the ContainerRecreateRequest: a main failed, and its podFailurePolicy may read the stop's exit code\n", p.NeedsJob)
	}
	if p.JobVerdict != nil {
		how := "the phase is settled from the main containers before the stop"
		for _, a := range p.Actions {
			if a.Kind == ActionSwapImage && a.JobRule != "" {
				how = fmt.Sprintf("so %v are stopped by the quick-exit image swap, whose exit 0 no rule reads", a.Containers)
			}
		}
		fmt.Fprintf(w, "Job:      %s; %s\n", p.JobVerdict, how)
	}
	for _, a := range p.Actions {
		fmt.Fprintf(w, "Action:   %s\n", describeActions([]Action{a}))
	}
	for _, pr := range p.Problems {
		fmt.Fprintf(w, "Warning:  %s: %s\n", pr.Reason, pr.Message)
	}
	if p.RequeueAfter > 0 {
		// To the second (to the millisecond below one): the rest is noise.
		d := p.RequeueAfter.Round(time.Second)
		if p.RequeueAfter < time.Second {
			d = p.RequeueAfter.Round(time.Millisecond)
		}
		fmt.Fprintf(w, "Recheck:  in %s\n", d)
	}
	if err := explainCRRs(w, p.CRRs); err != nil {
		return err
	}
	if st := p.SecondTerminator; st != nil {
		phase := st.Phase
		if phase == "" {
			phase = "(none yet)"
		}
		fmt.Fprintf(w, "\nSecond terminator: OpenKruise's own SidecarTerminator also acts on this pod: its ContainerRecreateRequest %s (phase %s) names %v. Run one terminator: turn off its feature gate.\n",
			st.CRR, phase, st.Containers)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// explainCRRs lists the pod's CRRs with the phase kruise wrote and what it
// means here: kruise keeps a CRR that did its job Recreating until its
// deadline, which alone reads like a kill still under way.
func explainCRRs(w io.Writer, crrs []CRRState) error {
	if len(crrs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nContainerRecreateRequests (PHASE and STATES as kruise reports them):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tATTEMPT\tPHASE\tSTATES\tMEANING")
	for _, c := range crrs {
		phase := c.Phase
		if phase == "" {
			phase = "(none yet)"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", c.Name, c.Attempt, phase, strings.Join(c.Containers, ","), c.Meaning)
	}
	return tw.Flush()
}

// mainDone says whether a main is done and why, by the kubelet's restart rules.
func mainDone(c Container) string {
	switch {
	case c.State != StateTerminated:
		return fmt.Sprintf("%s, not done", c.State)
	case c.AfterExit.Again:
		return fmt.Sprintf("exited %d, and %s runs it again: not done", c.ExitCode, c.AfterExit.Rule)
	}
	return fmt.Sprintf("exited %d, and %s does not run it again: done", c.ExitCode, c.AfterExit.Rule)
}
