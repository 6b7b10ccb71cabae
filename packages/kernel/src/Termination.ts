/**
 * When a run must stop: a pure function of State, evaluated between iterations. `done` is
 * the model's own decision and is recorded by the runner when the action is decoded.
 */
import { Option } from "effect"
import * as Behaviour from "./Behaviour.js"
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
  if (Behaviour.rules(state.behaviour).sameResults && state.observed.count >= o.maxRepeats) {
    return stop("no_progress", `${state.observed.count} calls in a row gave the same result, whatever their arguments: nothing changed (limit ${o.maxRepeats})`)
  }
  const period = Behaviour.rules(state.behaviour).cycles ? cycle(state.recent, o.maxRepeats) : 0
  if (period > 0) {
    return stop("no_progress", `the same ${period} calls with the same results came ${o.maxRepeats} times in a row (limit ${o.maxRepeats})`)
  }
  if (state.idleIterations >= o.noProgressWindow) {
    return stop("no_progress", `${state.idleIterations} iterations without a successful tool call (limit ${o.noProgressWindow})`)
  }
  const tokens = state.usage.inputTokens + state.usage.outputTokens
  if (o.maxTotalTokens !== undefined && tokens >= o.maxTotalTokens) {
    return stop("token_budget", `the run used ${tokens} tokens (limit ${o.maxTotalTokens})`)
  }
  if (state.completed >= o.maxIterations) {
    return stop("max_iterations", `reached the limit of ${o.maxIterations} iterations`)
  }
  return Option.none()
}

/** Longest cycle looked for: A, B, C, D, A, B, C, D, ... */
export const maxCyclePeriod = 4

/**
 * The period (2 to `maxCyclePeriod`) of a cycle that the latest fingerprints repeat `times`
 * times in a row, or 0. Period 1 (one call over and over) is the repeat rule's.
 */
export const cycle = (recent: ReadonlyArray<string>, times: number): number => {
  for (let period = 2; period <= maxCyclePeriod; period++) {
    const span = period * times
    if (span > recent.length) return 0
    const start = recent.length - span
    let periodic = true
    for (let i = start + period; i < recent.length && periodic; i++) periodic = recent[i] === recent[i - period]
    if (!periodic) continue
    // A block of one repeated call is the repeat rule's, not a cycle.
    let varied = false
    for (let i = start + 1; i < start + period && !varied; i++) varied = recent[i] !== recent[start]
    if (varied) return period
  }
  return 0
}

const stop = (reason: Event.Reason, detail: string) => Option.some<Stop>({ reason, detail })
