/**
 * Goals as the API shows them: the store's summary, with what only the log says of an open goal
 * (why it is suspended, the call awaiting approval) folded from it, and the server's activity.
 * Listing pages through the store's order (newest first) with an opaque cursor.
 */
import { Audit, Goal, type GoalSummary, type State, StateStore } from "@rx/kernel"
import { Effect, Either, Option, Schema } from "effect"
import type * as Api from "../Api.js"
import { BadRequest, NotFound } from "../ApiError.js"

/** Whether an open goal waits for a person: a call awaits a decision and no cancel came. */
export const waitsForPerson = (state: State.State): boolean =>
  state.terminated === null && state.awaiting !== null && state.awaiting.decision === null && state.cancelRequested === null

const statusOf = (state: State.State): Api.GoalStatus =>
  state.terminated !== null ? "terminated" : waitsForPerson(state) ? "waiting" : "open"

/** What only a goal's log says of it: whether it waits for a person, why it is suspended, the call awaiting a decision. */
interface FromLog {
  readonly status: Api.GoalStatus
  readonly suspended: Api.Goal["suspended"]
  readonly approval: Api.Goal["approval"]
}

const fromLog = (state: State.State): FromLog => {
  const awaiting = state.awaiting
  return {
    status: statusOf(state),
    suspended: state.suspended,
    approval: awaiting === null || awaiting.decision !== null ? null : { callId: awaiting.callId, tool: awaiting.tool, input: awaiting.input }
  }
}

/** The view of a goal from its summary and what its log says (a terminated goal's summary says all). */
const view = (summary: GoalSummary.GoalSummary, log: FromLog | undefined, activity: Api.Activity): Api.Goal => ({
  goalId: summary.goalId,
  goal: summary.goal,
  status: log?.status ?? summary.status,
  activity,
  iterations: summary.iterations,
  nextSeq: summary.nextSeq,
  reason: summary.reason,
  suspended: log?.suspended ?? null,
  approval: log?.approval ?? null,
  submittedAt: summary.submittedAt,
  updatedAt: summary.updatedAt
})

/**
 * What open goals' logs say, kept by goal while its log has not grown (the summary's `nextSeq`),
 * so listing the same open goals again folds nothing; the oldest entries go past `capacity`.
 */
export const makeCache = (capacity = 10_000) => {
  const kept = new Map<string, { readonly nextSeq: number; readonly log: FromLog }>()
  return (summary: GoalSummary.GoalSummary) =>
    Effect.suspend(() => {
      const hit = kept.get(summary.goalId)
      if (hit !== undefined && hit.nextSeq === summary.nextSeq) return Effect.succeed(hit.log)
      return Effect.map(Goal.restore(summary.goalId), (state) => {
        const log = fromLog(state)
        kept.delete(summary.goalId)
        kept.set(summary.goalId, { nextSeq: state.seq, log })
        if (kept.size > capacity) kept.delete(kept.keys().next().value ?? "")
        return log
      })
    })
}
export type Cache = ReturnType<typeof makeCache>

/** One goal, with its `Terminated` detail and termination audit; `NotFound` for an unknown id. */
export const one = (goalId: string, activity: (goalId: string) => Api.Activity) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const summary = yield* store.goal(goalId)
    if (Option.isNone(summary)) return yield* new NotFound({ goalId, message: `no goal with id ${goalId}` })
    const state = yield* Goal.restore(goalId)
    const goal = view(summary.value, fromLog(state), activity(goalId))
    if (state.terminated === null) return goal
    const audit = Audit.of(yield* store.load(goalId))
    return { ...goal, detail: state.terminated.detail, ...(audit === undefined ? {} : { audit: { ...audit, evidence: audit.evidence.map((e) => e.seq) } }) }
  })

/** Where a page ends: the last goal's submission time and id, in the store's order. */
const Cursor = Schema.Tuple(Schema.Number, Schema.String)
const CursorText = Schema.compose(Schema.StringFromBase64Url, Schema.parseJson(Cursor))
const encodeCursor = Schema.encodeSync(CursorText)
const decodeCursor = Schema.decodeUnknownEither(CursorText)

/** Whether `summary` comes after the cursor in the store's order (newest first, then by id, descending). */
const after = ([at, id]: typeof Cursor.Type) => (summary: GoalSummary.GoalSummary) =>
  summary.submittedAt < at || (summary.submittedAt === at && summary.goalId < id)

/** A page of goals with `status`, newest first, after `cursor`. */
export const page = (
  params: { readonly status?: Api.GoalStatus | undefined; readonly limit: number; readonly cursor?: string | undefined },
  activity: (goalId: string) => Api.Activity,
  cache: Cache
) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const cursor = params.cursor === undefined ? undefined : decodeCursor(params.cursor)
    if (cursor !== undefined && Either.isLeft(cursor)) {
      return yield* new BadRequest({ field: "cursor", message: "cursor: not a cursor this server gave" })
    }
    const position = cursor === undefined ? undefined : cursor.right
    const stored = yield* store.goals(params.status === undefined ? {} : { status: params.status === "terminated" ? "terminated" : "open" })
    const candidates = position === undefined ? stored : stored.filter(after(position))
    const goals: Array<Api.Goal> = []
    let more = false
    for (const summary of candidates) {
      // Only an open goal's log says whether it waits for a person.
      const log = summary.status === "open" ? yield* cache(summary) : undefined
      const goal = view(summary, log, activity(summary.goalId))
      if (params.status !== undefined && goal.status !== params.status) continue
      if (goals.length === params.limit) {
        more = true
        break
      }
      goals.push(goal)
    }
    const last = goals[goals.length - 1]
    return { goals, cursor: more && last !== undefined ? encodeCursor([last.submittedAt, last.goalId]) : null } satisfies Api.GoalPage
  })
