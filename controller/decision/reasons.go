package decision

// WarningReasons lists every reason a Problem can carry, so that the
// warnings counter can start each of its series at zero. A test checks that
// every Reason* constant of this package is listed.
func WarningReasons() []string {
	return []string{
		ReasonInvalidSidecarEnv, ReasonInvalidQuickExitImage, ReasonQuickExitImageNotAllowed,
		ReasonUnknownSidecarName, ReasonNoMainContainer, ReasonNoTerminationPath, ReasonNodeNotFound,
		ReasonSidecarKillFailed, ReasonSidecarKillGaveUp, ReasonPhaseSettleRefused, ReasonQuickExitNotRunning,
		ReasonSidecarRestartsAfterKill, ReasonSidecarKillRestartsPod, ReasonNearMissMark, ReasonInvalidStopOrder, ReasonStopOrderHeldUp,
		ReasonSecondTerminator, ReasonSidecarLeftRunning, ReasonSidecarFailedPod, ReasonJobPolicyReadsSidecarExit,
	}
}

// ReasonSidecarFailedPod: every main container succeeded, but a sidecar
// not marked ignore-exit-code exited non-zero on its stop, so the pod
// failed (jobsettle.go).
const ReasonSidecarFailedPod = "SidecarFailedPod"

// ReasonJobPolicyReadsSidecarExit: a rule of the Job's podFailurePolicy
// could read the exit code a ContainerRecreateRequest leaves on a sidecar,
// and no quick-exit swap can stop it instead; the phase is settled first
// (jobsettle.go).
const ReasonJobPolicyReadsSidecarExit = "JobPolicyReadsSidecarExit"

// Verdicts lists every Verdict, for the same reason. A test checks that
// every Verdict* constant of this package is listed.
func Verdicts() []Verdict {
	return []Verdict{VerdictIgnored, VerdictNoSidecars, VerdictNoMain, VerdictMainsActive, VerdictDone,
		VerdictInProgress, VerdictAct, VerdictNoPath}
}
