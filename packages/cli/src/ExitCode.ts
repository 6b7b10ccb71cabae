/** The exit codes of `rx`: one per termination reason, so scripts can tell outcomes apart. */
import type { Event, Goal } from "@rx/kernel"

export const byReason: Readonly<Record<Event.Reason, number>> = {
  done: 0,
  max_iterations: 2,
  fatal_error: 3,
  repeated_failure: 4,
  malformed_output: 5,
  no_progress: 6,
  cancelled: 7,
  token_budget: 9
}

/** The goal is open, waiting (the model is unreachable, a call awaits approval, rx was shut down): `rx resume` continues it. */
export const suspended = 11

/** The exit code of a run's result. */
export const of = (result: Goal.Result): number => (result.status === "suspended" ? suspended : byReason[result.reason])

/** rx itself failed: bad flags, an unknown goal, a database it cannot use. */
export const failure = 1
/** `rx replay` found a divergence. */
export const diverged = 8
/** `rx doctor` found problems in the database. */
export const unhealthy = 10
/** `rx eval --min-agreement X`: the model agreed with fewer recorded decisions than X. */
export const belowAgreement = 12
/** A second Ctrl-C: stopped at once, the goal left open for `rx resume`. */
export const interrupted = 130

/** The table, as `rx --help` and the README show it, by code. */
export const table = [
  ...Object.entries(byReason).map(([reason, code]) => [code, reason] as const),
  [failure, "error (bad flags, unknown goal, unusable database)"] as const,
  [diverged, "replay diverged"] as const,
  [unhealthy, "rx doctor found problems in the database"] as const,
  [belowAgreement, "rx eval: agreement below --min-agreement"] as const,
  [suspended, "suspended: the goal is open and waits (model unreachable, a call awaiting approval, stopped by SIGTERM or SIGHUP); rx resume continues it"] as const,
  [interrupted, "interrupted by a second Ctrl-C (the goal stays open)"] as const
].sort(([a], [b]) => a - b).map(([code, what]) => `${code}  ${what}`).join("\n")
