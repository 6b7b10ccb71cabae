/**
 * `View.goal`: a goal whole, from its log and what its store says of its tree, as `rx inspect`
 * prints it and `GET /v1/goals/{id}/view` serves it.
 */
import { Audit, Continuation, type Event, GoalSummary, State, StateStore } from "@rx/kernel"
import { Effect, Option } from "effect"
import type { Child, Goal } from "./entries.js"
import { changes, steps } from "./steps.js"

/** `text` on one line, at most `max` characters (`…` where it was cut). */
export const oneLine = (text: string, max: number): string => {
  // Only the start matters: a 5 MB value is not flattened whole.
  const head = text.length > max * 4 ? text.slice(0, max * 4) : text
  const flat = head.replace(/\s+/g, " ").trim()
  return flat.length <= max && head === text ? flat : `${flat.slice(0, max - 1)}…`
}

const json = (value: unknown): string => JSON.stringify(value) ?? "null"

/** A decision on a call: who, and for a denial why. */
export const decision = (event: { readonly approved: boolean; readonly by: string; readonly reason: string }) =>
  `${event.approved ? "approved" : "denied"} by ${oneLine(event.by, 80)}${event.approved ? "" : `: ${oneLine(event.reason, 200)}`}`

/** Why the run stopped, the limit involved, and the events that led there (`Audit.of`); or what continues an open goal. */
export const termination = (events: ReadonlyArray<Event.Event>): ReadonlyArray<string> => {
  const found = Audit.of(events)
  const submitted = events[0]
  if (found === undefined) {
    if (submitted?._tag !== "GoalSubmitted") return ["not terminated: the goal is open (rx resume <id> continues it)"]
    const id = submitted.goalId
    const { awaiting, suspended } = State.fromEvents(id, events)
    const decide = awaiting !== null && awaiting.decision === null ? `rx approve ${id} or rx deny ${id}, then ` : ""
    return [
      suspended === null
        ? `not terminated: the goal is open (${decide}rx resume ${id} continues it)`
        : `not terminated: the goal is open, suspended (${suspended.reason}): ${oneLine(suspended.detail, 500)} (${decide}rx resume ${id} continues it)`
    ]
  }
  const describe = (e: Event.Event) => {
    switch (e._tag) {
      case "ToolFailed": return `seq ${e.seq}: ${e.tool} failed (${e.error.kind}): ${oneLine(e.error.message, 80)}`
      case "ToolSucceeded": return `seq ${e.seq}: ${e.tool} succeeded: ${oneLine(json(e.output), 80)}`
      case "ActionRejected": return `seq ${e.seq}: answer rejected (${e.kind}): ${oneLine(e.reason, 80)}`
      case "ModelResponded": return `seq ${e.seq}: model answered ${oneLine(e.response.toolCalls[0]?.arguments ?? e.response.text, 80)}`
      case "CancelRequested": return `seq ${e.seq}: cancel requested: ${oneLine(e.reason, 80)}`
      case "ApprovalDecided": return `seq ${e.seq}: call ${oneLine(e.callId, 80)} ${decision(e)}`
      default: return `seq ${e.seq}: ${e._tag}`
    }
  }
  return [
    `reason    ${found.reason} (seq ${found.seq}, ${new Date(found.at).toISOString()})`,
    `detail    ${oneLine(found.detail, 2_000)}`,
    `limit     ${found.limit}`,
    "led there",
    ...found.evidence.map((e) => `  ${describe(e)}`)
  ]
}

/** Where a goal is in its tree, as its store says: its sub-goals, the goals that continue it, its forks, and what it does now. */
export interface Tree {
  readonly children?: ReadonlyArray<Child & { readonly submittedAt: number }>
  /** The goals that continue this one (`rx run --continue`), from their own first events. */
  readonly continuedBy?: ReadonlyArray<string>
  /** Its forks (`rx fork`), each with the step it was forked at. */
  readonly forks?: ReadonlyArray<{ readonly goalId: string; readonly iteration: number }>
  /** What it does now (`GoalSummary.phase`), when the store can say whether a runner holds it. */
  readonly phase?: GoalSummary.Phase | undefined
}

/** A goal whole (`View.Goal`): from its log, which starts with `submitted`, and what its store says of its tree. */
export const goal = (submitted: Event.Of<"GoalSubmitted">, events: ReadonlyArray<Event.Event>, tree: Tree = {}): Goal => {
  const state = State.fromEvents(submitted.goalId, events)
  let options = submitted.options
  const optionsChanged = events.flatMap((e) => {
    if (e._tag !== "OptionsChanged") return []
    const changed = changes(options, e.options)
    options = e.options
    return [{ seq: e.seq, at: e.at, iteration: e.iteration, changes: changed }]
  })
  return {
    goalId: submitted.goalId,
    goal: submitted.goal,
    submittedAt: new Date(submitted.at),
    status: state.terminated === null ? "open" : "terminated",
    ...(tree.phase === undefined ? {} : { phase: tree.phase }),
    terminated: state.terminated,
    suspended: state.terminated === null ? state.suspended : null,
    iterations: state.completed,
    events: events.length,
    usage: state.usage,
    parent: submitted.parent ?? null,
    continues: submitted.continues?.goalId ?? null,
    continuedWith: submitted.continues === undefined ? null : { reason: submitted.continues.reason, text: submitted.continues.text },
    continuedBy: tree.continuedBy ?? [],
    children: [...(tree.children ?? [])]
      .sort((a, b) => a.submittedAt - b.submittedAt || (a.goalId < b.goalId ? -1 : 1))
      .map(({ goal, goalId, phase, reason, status, suspended }) => ({ goalId, goal, status, phase, reason, suspended })),
    forkedFrom: submitted.forkedFrom ?? null,
    forks: tree.forks ?? [],
    options: submitted.options,
    optionsChanged,
    ...(submitted.instructions === undefined ? {} : { instructions: submitted.instructions }),
    tools: submitted.tools.map((t) => t.name),
    steps: steps(events),
    termination: termination(events)
  }
}

/**
 * A goal whole from its store: its log, and its sub-goals, forks and continuations as the store
 * lists them, each with what it does now (`running`: whether a runner holds a goal now). None for
 * a goal the store does not hold.
 */
export const fromStore = <E, R>(goalId: string, running: (summary: GoalSummary.GoalSummary) => Effect.Effect<boolean, E, R>) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const summary = yield* store.goal(goalId)
    const events = yield* store.load(goalId)
    const submitted = events[0]
    if (Option.isNone(summary) || submitted?._tag !== "GoalSubmitted") return Option.none<Goal>()
    const phase = (s: GoalSummary.GoalSummary) => Effect.map(running(s), (runs) => GoalSummary.phase(s, runs))
    const [children, forks, continuedBy] = yield* Effect.all([store.goals({ parent: goalId }), store.goals({ forkedFrom: goalId }), Continuation.continuedBy(goalId)])
    return Option.some(goal(submitted, events, {
      phase: yield* phase(summary.value),
      children: yield* Effect.forEach(children, (c) =>
        Effect.map(phase(c), (p) => ({ goalId: c.goalId, goal: c.goal, status: c.status, phase: p, reason: c.reason, suspended: c.suspended, submittedAt: c.submittedAt }))),
      forks: forks.flatMap((f) => (f.forkedFrom === null ? [] : [{ goalId: f.goalId, iteration: f.forkedFrom.iteration }])),
      continuedBy
    }))
  })
