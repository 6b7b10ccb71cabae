/**
 * When a run must stop: a pure function of State, evaluated between iterations. `done` is
 * the model's own decision and is recorded by the runner when the action is decoded.
 */
import { Option } from "effect"
import type * as Event from "./Event.js"
import type * as State from "./State.js"

/** Why to stop, and the limit involved, for the `Terminated` event. */
export interface Stop {
  readonly reason: Event.Reason
  readonly detail: string
}

/** The first rule that holds, in order of precedence; `None` means the run goes on. */
export const check = (state: State.State): Option.Option<Stop> => {
  const o = state.options
  if (state.cancelRequested !== null) return stop("cancelled", state.cancelRequested)
  if (state.modelFailure !== null) return stop("fatal_error", `the model failed: ${state.modelFailure}`)
  if (state.fatal !== null) return stop("fatal_error", `fatal tool error: ${state.fatal.message}`)
  if (state.consecutiveFailures >= o.maxConsecutiveFailures) {
    return stop("repeated_failure", `${state.consecutiveFailures} tool calls failed in a row (limit ${o.maxConsecutiveFailures})`)
  }
  if (state.consecutiveMalformed >= o.maxMalformed) {
    return stop("malformed_output", `${state.consecutiveMalformed} model answers in a row were rejected (limit ${o.maxMalformed})`)
  }
  if (state.repeat.count >= o.maxRepeats) {
    return stop("no_progress", `the same call gave the same result ${state.repeat.count} times in a row (limit ${o.maxRepeats})`)
  }
  if (state.idleIterations >= o.noProgressWindow) {
    return stop("no_progress", `${state.idleIterations} iterations without a successful tool call (limit ${o.noProgressWindow})`)
  }
  if (state.completed >= o.maxIterations) {
    return stop("max_iterations", `reached the limit of ${o.maxIterations} iterations`)
  }
  return Option.none()
}

const stop = (reason: Event.Reason, detail: string) => Option.some<Stop>({ reason, detail })
