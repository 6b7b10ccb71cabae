/**
 * The termination audit: why a goal ended, the limit involved, and the events that led there,
 * read from its log. Pure and shared, so every transport (the CLI's text, the server's JSON, the
 * web inspector) tells the same story.
 */
import * as Event from "./Event.js"

export interface Audit {
  readonly reason: Event.Reason
  /** The `Terminated` event's seq, time and detail. */
  readonly seq: number
  readonly at: number
  readonly detail: string
  /** The rule or limit that ended the goal, with its value (`maxIterations = 50`). */
  readonly limit: string
  /** The events that led there, oldest first. */
  readonly evidence: ReadonlyArray<Event.Event>
}

/** The audit of a terminated goal's log; `undefined` while the goal is open. */
export const of = (events: ReadonlyArray<Event.Event>): Audit | undefined => {
  const end = events.findLast((e): e is Event.Of<"Terminated"> => e._tag === "Terminated")
  const submitted = events[0]
  if (end === undefined || submitted?._tag !== "GoalSubmitted") return undefined
  // The limits in force at the end: the last options recorded.
  const changed = events.findLast((e): e is Event.Of<"OptionsChanged"> => e._tag === "OptionsChanged")
  const o = changed?.options ?? submitted.options
  const last = <T extends Event.Event["_tag"]>(tag: T, n: number) => events.filter((e): e is Event.Of<T> => e._tag === tag).slice(-n)
  const evidence: ReadonlyArray<Event.Event> = (() => {
    switch (end.reason) {
      case "done":
        return last("ModelResponded", 1)
      case "max_iterations":
        return last("IterationCompleted", 1)
      case "fatal_error":
        return [...last("ModelFailed", 1), ...last("ToolFailed", 1)].sort((a, b) => a.seq - b.seq).slice(-1)
      case "repeated_failure":
        return last("ToolFailed", o.maxConsecutiveFailures)
      case "malformed_output":
        return last("ActionRejected", o.maxMalformed)
      case "no_progress":
        return events.filter((e) => e._tag === "ToolSucceeded" || e._tag === "ToolFailed" || e._tag === "ActionRejected").slice(-Math.max(o.maxRepeats, 3))
      case "cancelled":
        return last("CancelRequested", 1)
      case "token_budget":
        return last("ModelResponded", 1)
    }
  })()
  const limit: Record<Event.Reason, string> = {
    done: "the model called done",
    max_iterations: `maxIterations = ${o.maxIterations}`,
    fatal_error: "a fatal error ends a run at once",
    repeated_failure: `maxConsecutiveFailures = ${o.maxConsecutiveFailures}`,
    malformed_output: `maxMalformed = ${o.maxMalformed}`,
    no_progress: `maxRepeats = ${o.maxRepeats}, noProgressWindow = ${o.noProgressWindow}`,
    cancelled: "a cancel request",
    token_budget: `maxTotalTokens = ${o.maxTotalTokens ?? "unlimited"}`
  }
  return { reason: end.reason, seq: end.seq, at: end.at, detail: end.detail, limit: limit[end.reason], evidence }
}
